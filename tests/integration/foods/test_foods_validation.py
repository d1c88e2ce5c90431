"""Bad input, router errors, body limits, the command line, and the OpenAPI
document checked against the running server (paths, methods, status codes,
response shapes and every documented limit). Validation happens before the
database is involved, so these run on SQLite only."""
from __future__ import annotations

import re

import json
import subprocess

import pytest

from brisk_testlib import RawConn
from foods_lib import FOODS_BIN, FoodsServer, food, unique


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    d = tmp_path_factory.mktemp("foods-valid")
    s = FoodsServer(f"sqlite:{d}/foods.db", d, seed=50, workers=1).start()
    yield s
    s.stop()
    problems = s.problems()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


GOOD = food("Apple", category_id=1, kcal=52, protein=0.3, carbs=14, fat=0.2)


def with_(**kw):
    d = dict(GOOD)
    for k, v in kw.items():
        if v is ...:
            d.pop(k)
        else:
            d[k] = v
    return json.dumps(d).encode()


# (method, path, raw body, status, field)
BAD = [
    # not JSON at all: 400, field null
    ("POST", "/api/foods", b"", 400, None),
    ("POST", "/api/foods", b"{", 400, None),
    ("POST", "/api/foods", b"[1,]", 400, None),
    ("POST", "/api/foods", b"{\"name\":\"a\"} x", 400, None),
    ("POST", "/api/foods", b"{}{}", 400, None),
    ("POST", "/api/foods", b"\xff", 400, None),
    ("POST", "/api/foods", b"{\"name\":\"\xc3\x28\"}", 400, None),          # invalid UTF-8
    ("POST", "/api/foods", b"{\"name\":\"\xed\xa0\x80\"}", 400, None),      # encoded surrogate
    ("POST", "/api/foods", b"{\"name\":\"a\x01b\"}", 400, None),            # raw control char
    ("POST", "/api/foods", b"{\"name\":\"a\\u0000b\"}", 400, None),         # NUL escape
    ("POST", "/api/foods", b"\"\\udc00\"", 400, None),                     # lone surrogate
    ("POST", "/api/foods", b"[" * 5000, 400, None),                        # too deep
    # JSON of the wrong shape or values: 422 naming the field
    ("POST", "/api/foods", b"null", 422, None),
    ("POST", "/api/foods", b"[]", 422, None),
    ("POST", "/api/foods", b"\"food\"", 422, None),
    ("POST", "/api/foods", with_(name=...), 422, "name"),
    ("POST", "/api/foods", with_(name=123), 422, "name"),
    ("POST", "/api/foods", with_(name=""), 422, "name"),
    ("POST", "/api/foods", with_(name="tab\there"), 422, "name"),
    ("POST", "/api/foods", with_(name="x" * 201), 422, "name"),
    ("POST", "/api/foods", with_(category_id=...), 422, "category_id"),
    ("POST", "/api/foods", with_(category_id="1"), 422, "category_id"),
    ("POST", "/api/foods", with_(category_id=1.5), 422, "category_id"),
    ("POST", "/api/foods", with_(category_id=0), 422, "category_id"),
    ("POST", "/api/foods", with_(category_id=True), 422, "category_id"),
    ("POST", "/api/foods", with_(category_id=2 ** 31), 422, "category_id"),
    ("POST", "/api/foods", with_(kcal="52"), 422, "kcal"),
    ("POST", "/api/foods", with_(kcal=900.5), 422, "kcal"),
    ("POST", "/api/foods", with_(kcal=None), 422, "kcal"),
    ("POST", "/api/foods", with_(protein=-0.1), 422, "protein"),
    ("POST", "/api/foods", with_(carbs=100.01), 422, "carbs"),
    ("POST", "/api/foods", with_(fat=...), 422, "fat"),
    ("POST", "/api/foods", b"{\"name\":\"a\",\"category_id\":1,\"kcal\":1e999}", 422, "kcal"),
    ("PUT", "/api/foods/1", with_(fat=[]), 422, "fat"),
    ("PUT", "/api/foods/1", b"{", 400, None),
    # path and query parameters
    ("PUT", "/api/foods/abc", with_(), 422, "id"),
    ("GET", "/api/foods/-1", None, 422, "id"),
    ("GET", "/api/foods/0", None, 422, "id"),
    ("GET", "/api/foods/1.5", None, 422, "id"),
    ("DELETE", "/api/foods/99999999999999999999", None, 422, "id"),
    ("GET", "/api/foods/12abc", None, 422, "id"),
    ("GET", "/api/foods?limit=0", None, 422, "limit"),
    ("GET", "/api/foods?limit=101", None, 422, "limit"),
    ("GET", "/api/foods?limit=abc", None, 422, "limit"),
    ("GET", "/api/foods?limit=1e2", None, 422, "limit"),
    ("GET", "/api/foods?limit=", None, 422, "limit"),
    ("GET", "/api/foods?offset=-1", None, 422, "offset"),
    ("GET", "/api/foods?offset=1000000001", None, 422, "offset"),
    ("GET", "/api/foods?category_id=0", None, 422, "category_id"),
    ("GET", "/api/foods?category_id=x", None, 422, "category_id"),
    ("GET", "/api/foods?q=" + "a" * 101, None, 422, "q"),
    ("GET", "/api/foods?q=%FF", None, 422, "q"),
    ("GET", "/api/foods?q=a%01b", None, 422, "q"),
    ("GET", "/api/templates?limit=1001", None, 422, "limit"),
    ("GET", "/api/templates?offset=x", None, 422, "offset"),
    # templates
    ("POST", "/api/templates", b"{\"name\":\"t\",\"items\":[]}", 422, "items"),
    ("POST", "/api/templates", b"{\"name\":\"t\",\"items\":{}}", 422, "items"),
    ("POST", "/api/templates", b"{\"name\":\"t\"}", 422, "items"),
    ("POST", "/api/templates", b"{\"items\":[{\"food_id\":1,\"grams\":1}]}", 422, "name"),
    ("POST", "/api/templates", b"{\"name\":\"t\",\"items\":[{\"food_id\":1,\"grams\":0}]}", 422,
     "items[0].grams"),
    ("POST", "/api/templates", b"{\"name\":\"t\",\"items\":[{\"food_id\":1,\"grams\":1},"
     b"{\"food_id\":\"1\",\"grams\":1}]}", 422, "items[1].food_id"),
    ("POST", "/api/templates", b"{\"name\":\"t\",\"items\":[{\"food_id\":1,\"grams\":10001}]}",
     422, "items[0].grams"),
    ("POST", "/api/templates", json.dumps({"name": "t", "items": [
        {"food_id": 1, "grams": 1}] * 101}).encode(), 422, "items"),
    ("POST", "/api/templates", b"[]", 422, None),
    # bulk
    ("POST", "/api/foods/bulk", b"[" + with_() + b"," + with_(kcal=-5) + b"]", 422, "[1].kcal"),
    ("POST", "/api/foods/bulk", b"[" + with_() + b",7]", 422, "[1]"),
    ("POST", "/api/foods/bulk", b"{}", 422, None),
    ("POST", "/api/foods/bulk", b"[", 400, None),
]


@pytest.mark.parametrize("method,path,body,status,field", BAD,
                         ids=[f"{m} {p[:40]} {b[:30]!r}" if b is not None else f"{m} {p[:60]}"
                              for m, p, b, _, _ in BAD])
def test_bad_input(srv, method, path, body, status, field):
    before = srv.api.ok("GET", "/api/foods?limit=100&offset=0")
    r = srv.api.call(method, path, raw=body)
    r.error(status, field)
    if method != "GET":
        assert srv.api.ok("GET", "/api/foods?limit=100&offset=0") == before  # nothing written


def test_router_errors_are_json(srv):
    api = srv.api
    api.get("/nope").error(404)
    api.get("/api/foods/").error(404)
    api.get("/api/foods/1/extra").error(404)
    r = api.call("PATCH", "/api/foods/1")
    r.error(405)
    assert r.headers["allow"] == "GET, PUT, DELETE"
    r = api.delete("/api/foods")
    r.error(405)
    assert r.headers["allow"] == "GET, POST"
    r = api.get("/api/foods/bulk")
    r.error(405)
    assert r.headers["allow"] == "POST"


def test_ten_megabyte_body_is_413(srv):
    size = 10 * 1024 * 1024
    c = RawConn("127.0.0.1", srv.port, timeout=10)
    c.send(b"POST /api/foods/bulk HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % size)
    c.send(b"[" + b" " * (size - 2) + b"]")
    r = c.read_response()
    assert r.status == 413
    assert r.header("content-type") == "application/json"  # brisk_on_error renders it
    assert b'"error"' in r.body
    c.close()
    # Chunked, so the size is only known while reading.
    c = RawConn("127.0.0.1", srv.port, timeout=10)
    c.send(b"POST /api/foods/bulk HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b" " * 65536
    for _ in range(size // len(chunk)):
        c.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        if c.send_error:
            break
    r = c.read_response()
    assert r.status == 413
    c.close()
    assert srv.api.get("/api/health").status == 200


def test_body_limit_is_one_mebibyte(srv):
    limit = 1024 * 1024
    # Exactly the limit is read (and judged on its content) ...
    srv.api.post("/api/foods/bulk", raw=b"[" + b" " * (limit - 2) + b"]").error(422)
    # ... one byte more is refused unread.
    r = srv.api.post("/api/foods/bulk", raw=b"[" + b" " * (limit - 1) + b"]")
    assert r.status == 413


# ------------------------------------------------------------------ CLI
def run_foods(args, cwd, timeout=10):
    p = subprocess.run([str(FOODS_BIN), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout, cwd=cwd)
    for m in ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer"):
        assert m not in p.stderr, p.stderr
    return p


def test_command_line(tmp_path):
    p = run_foods(["--help"], tmp_path)
    assert p.returncode == 0 and "--db URL" in p.stdout and "--seed" in p.stdout
    p = run_foods(["--db", "oracle://x"], tmp_path)
    assert p.returncode == 2 and "unknown database URL" in p.stderr
    p = run_foods(["--seed", "abc"], tmp_path)
    assert p.returncode == 2 and "--seed" in p.stderr
    p = run_foods(["--db"], tmp_path)
    assert p.returncode == 2
    p = run_foods(["--db", f"sqlite:{tmp_path}/missing/dir/x.db"], tmp_path)
    assert p.returncode == 1 and "database setup failed" in p.stderr


# -------------------------------------------------------------- OpenAPI
IMPLEMENTED = {
    ("/api/health", "get"), ("/api/openapi.json", "get"), ("/api/categories", "get"),
    ("/api/foods", "get"), ("/api/foods", "post"), ("/api/foods/bulk", "post"),
    ("/api/foods/{id}", "get"), ("/api/foods/{id}", "put"), ("/api/foods/{id}", "delete"),
    ("/api/templates", "get"), ("/api/templates", "post"), ("/api/templates/{id}/full", "get"),
}
METHODS = ["get", "post", "put", "delete", "patch"]


@pytest.fixture(scope="module")
def doc(srv):
    r = srv.api.get("/api/openapi.json")
    assert r.status == 200
    d = r.json
    assert d["openapi"].startswith("3.")
    return d


def resolve(doc, schema):
    while "$ref" in schema:
        node = doc
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def check(doc, schema, value, where="$"):
    """A small JSON Schema check: types, required and only the documented
    properties, items, enums, allOf, nullable, numeric and length limits."""
    schema = resolve(doc, schema)
    if "allOf" in schema:
        merged = {"type": "object", "required": [], "properties": {}}
        for s in schema["allOf"]:
            s = resolve(doc, s)
            merged["required"] += s.get("required", [])
            merged["properties"].update(s.get("properties", {}))
        schema = merged
    if value is None:
        assert schema.get("nullable"), f"{where}: null not allowed"
        return
    t = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool}
    if t == "integer":
        assert isinstance(value, int) and not isinstance(value, bool), f"{where}: {value!r}"
    elif t == "number":
        assert isinstance(value, (int, float)) and not isinstance(value, bool), where
    elif t:
        assert isinstance(value, types[t]), f"{where}: {value!r} is not {t}"
    if "enum" in schema:
        assert value in schema["enum"], where
    if t == "object":
        props = schema.get("properties")
        for k in schema.get("required", []):
            assert k in value, f"{where}: missing {k}"
        if props is not None:
            assert set(value) <= set(props), f"{where}: undocumented {set(value) - set(props)}"
            for k, v in value.items():
                check(doc, props[k], v, f"{where}.{k}")
    if t == "array":
        for i, v in enumerate(value):
            check(doc, schema.get("items", {}), v, f"{where}[{i}]")


def test_openapi_paths_and_methods_match_the_server(srv, doc):
    documented = {(p, m) for p, ops in doc["paths"].items() for m in ops if m in METHODS}
    assert documented == IMPLEMENTED
    for path, ops in doc["paths"].items():
        concrete = path.replace("{id}", "1")
        allowed = [m.upper() for m in METHODS if m in ops]
        for m in METHODS:
            r = srv.api.call(m.upper(), concrete, raw=b"{}" if m in ("post", "put") else None)
            if m in ops:
                assert r.status != 405, (m, path)
                assert str(r.status) in ops[m]["responses"], (m, path, r)
            else:
                r.error(405)
                assert sorted(r.headers["allow"].split(", ")) == sorted(allowed), (m, path)
        # a method HTTP does not define is refused the same way, not with 501
        r = srv.api.call("PURGE", concrete)
        r.error(405)
        assert sorted(r.headers["allow"].split(", ")) == sorted(allowed), ("PURGE", path)


def test_openapi_responses_match(srv, doc):
    api = srv.api
    name = unique("Doc")
    fid = api.ok("POST", "/api/foods", food(name), status=201)["id"]
    doomed = api.ok("POST", "/api/foods", food(name + "x"), status=201)["id"]
    tid = api.ok("POST", "/api/templates", {"name": name, "items": [{"food_id": fid, "grams": 5}]},
                 status=201)["id"]
    calls = [
        ("/api/health", "get", "GET", "/api/health", None),
        ("/api/categories", "get", "GET", "/api/categories", None),
        ("/api/foods", "get", "GET", "/api/foods?limit=7", None),
        ("/api/foods", "post", "POST", "/api/foods", food(name)),
        ("/api/foods/bulk", "post", "POST", "/api/foods/bulk", [food(name)] * 3),
        ("/api/foods/{id}", "get", "GET", f"/api/foods/{fid}", None),
        ("/api/foods/{id}", "put", "PUT", f"/api/foods/{fid}", food(name, kcal=1)),
        ("/api/foods/{id}", "delete", "DELETE", f"/api/foods/{doomed}", None),
        ("/api/foods/{id}", "get", "GET", f"/api/foods/{doomed}", None),
        ("/api/foods/{id}", "get", "GET", "/api/foods/x", None),
        ("/api/templates", "get", "GET", "/api/templates", None),
        ("/api/templates", "post", "POST", "/api/templates",
         {"name": name, "items": [{"food_id": fid, "grams": 1}]}),
        ("/api/templates/{id}/full", "get", "GET", f"/api/templates/{tid}/full", None),
        ("/api/templates/{id}/full", "get", "GET", "/api/templates/99999/full", None),
    ]
    for path, op, method, url, body in calls:
        r = api.call(method, url, body)
        responses = doc["paths"][path][op]["responses"]
        assert str(r.status) in responses, (url, r)
        content = responses[str(r.status)].get("content")
        if content is None:
            assert r.body == b"", url
            continue
        assert list(content) == ["application/json"], url
        check(doc, content["application/json"]["schema"], r.json, f"{method} {url}")


def query_params(doc):
    for path, ops in doc["paths"].items():
        for m, op in ops.items():
            if m != "get":
                continue
            for p in op.get("parameters", []):
                if p["in"] == "query" and p["schema"]["type"] == "integer":
                    yield path, p["name"], p["schema"]


def test_openapi_query_limits_are_enforced(srv, doc):
    found = 0
    for path, name, schema in query_params(doc):
        found += 1
        lo, hi = schema["minimum"], schema["maximum"]
        for v in (lo, hi):
            assert srv.api.get(f"{path}?{name}={v}").status == 200, (path, name, v)
        for v in (lo - 1, hi + 1):
            srv.api.get(f"{path}?{name}={v}").error(422, name)
        if "default" in schema:
            assert srv.api.ok("GET", f"{path}?{name}={schema['default']}") == \
                srv.api.ok("GET", path), (path, name)
    assert found == 5  # category_id, limit, offset; limit, offset
    q = [p for p in doc["paths"]["/api/foods"]["get"]["parameters"] if p["name"] == "q"][0]
    n = q["schema"]["maxLength"]
    assert srv.api.get("/api/foods?q=" + "z" * n).status == 200
    srv.api.get("/api/foods?q=" + "z" * (n + 1)).error(422, "q")
    # the documented pattern is what the server enforces: no control characters
    pat = re.compile(q["schema"]["pattern"])
    for bad in ("a%01b", "%7F", "x%0Ay", "%00"):
        raw = bad.replace("%01", "\x01").replace("%7F", "\x7f").replace("%0A", "\n").replace(
            "%00", "\x00")
        assert not pat.match(raw), bad
        srv.api.get("/api/foods?q=" + bad).error(422, "q")
    assert pat.match("ordinary text é")


def test_openapi_body_limits_are_enforced(srv, doc):
    api = srv.api
    schemas = doc["components"]["schemas"]
    props = schemas["FoodIn"]["properties"]
    assert set(schemas["FoodIn"]["required"]) == set(props)
    for k, s in props.items():
        if s["type"] == "number":
            api.ok("POST", "/api/foods", food(unique("Lim"), **{k: s["maximum"]}), status=201)
            api.ok("POST", "/api/foods", food(unique("Lim"), **{k: s["minimum"]}), status=201)
            api.post("/api/foods", food(unique("Lim"), **{k: s["maximum"] + 0.01})).error(422, k)
            api.post("/api/foods", food(unique("Lim"), **{k: s["minimum"] - 0.01})).error(422, k)
    pat = re.compile(props["name"]["pattern"])
    assert not pat.match("a\x01b") and pat.match("Brot é")
    api.post("/api/foods", food("a\x01b")).error(422, "name")  # sent escaped as \u0001
    raw = json.dumps(food("a\x01b")).encode().replace(b"\\u0001", b"\x01")
    api.post("/api/foods", raw=raw).error(400)  # a raw control character: malformed JSON
    raw = json.dumps(food("nul\u0000x")).encode()  # \u0000 escaped in the JSON text
    assert b"\\u0000" in raw
    api.post("/api/foods", raw=raw).error(400)
    n = props["name"]["maxLength"]
    api.ok("POST", "/api/foods", food("é" * n), status=201)  # characters, not bytes
    api.post("/api/foods", food("é" * (n + 1))).error(422, "name")
    api.post("/api/foods", food("")).error(422, "name")
    cid = props["category_id"]
    api.post("/api/foods", food("c", category_id=cid["maximum"] + 1)).error(422, "category_id")
    bulk = doc["paths"]["/api/foods/bulk"]["post"]["requestBody"]["content"][
        "application/json"]["schema"]
    assert (bulk["minItems"], bulk["maxItems"]) == (1, 1000)
    item = schemas["TemplateItemIn"]["properties"]
    tin = schemas["TemplateIn"]["properties"]
    fid = api.ok("GET", "/api/foods?limit=1")[0]["id"]
    g = item["grams"]
    assert g["exclusiveMinimum"] is True and g["minimum"] == 0
    api.ok("POST", "/api/templates", {"name": "g", "items": [
        {"food_id": fid, "grams": g["maximum"]}]}, status=201)
    api.post("/api/templates", {"name": "g", "items": [
        {"food_id": fid, "grams": g["maximum"] + 0.01}]}).error(422, "items[0].grams")
    api.post("/api/templates", {"name": "g", "items": [
        {"food_id": fid, "grams": 0}]}).error(422, "items[0].grams")
    most = tin["items"]["maxItems"]
    api.ok("POST", "/api/templates", {"name": "many", "items": [
        {"food_id": fid, "grams": 1}] * most}, status=201)
    api.post("/api/templates", {"name": "many", "items": [
        {"food_id": fid, "grams": 1}] * (most + 1)}).error(422, "items")
