"""Every endpoint of brisk-foods, on SQLite, PostgreSQL and MariaDB (the
`foods` fixture runs this module once per backend, seeded with 200 foods
and 20 templates)."""
from __future__ import annotations

import json

from foods_lib import CATEGORIES, FOOD_KEYS, food, unique


def check_food_shape(f):
    assert set(f) == FOOD_KEYS, f
    assert isinstance(f["id"], int) and f["id"] >= 1
    assert isinstance(f["name"], str) and f["name"]
    assert isinstance(f["category_id"], int) and 1 <= f["category_id"] <= 20
    for k in ("kcal", "protein", "carbs", "fat"):
        assert isinstance(f[k], float), (k, f)


def test_health(foods):
    r = foods.api.get("/api/health")
    assert r.status == 200
    assert r.json == {"status": "ok", "database": foods.backend}


def test_categories(foods):
    r = foods.api.get("/api/categories")
    assert r.status == 200
    assert r.json == [{"id": i + 1, "name": n} for i, n in enumerate(CATEGORIES)]


def test_foods_list_paging(foods):
    api = foods.api
    first = api.ok("GET", "/api/foods")
    assert len(first) == 20  # default limit
    for f in first:
        check_food_shape(f)
    hundred = api.ok("GET", "/api/foods?limit=100")
    assert len(hundred) == 100
    ids = [f["id"] for f in hundred]
    assert ids == sorted(ids) and len(set(ids)) == 100
    assert hundred[:20] == first
    assert api.ok("GET", "/api/foods?limit=10&offset=5") == hundred[5:15]
    everything = api.all_foods()
    assert len(everything) >= 200
    assert api.ok("GET", "/api/foods?offset=1000000") == []


def test_seeded_food_is_deterministic(foods):
    # The first food of the generator (the FastAPI peer makes the same).
    assert foods.api.ok("GET", "/api/foods/1") == {
        "id": 1, "name": "Grilled Crackers 1", "category_id": 12, "kcal": 88.3,
        "protein": 13.9, "carbs": 3.9, "fat": 1.9}


def test_foods_filters(foods):
    api = foods.api
    everything = api.all_foods()
    cat3 = api.ok("GET", "/api/foods?category_id=3&limit=100")
    assert cat3 == [f for f in everything if f["category_id"] == 3][:100]
    assert cat3, "the seed puts foods in every category"
    # Case-insensitive substring match on the name.
    creme = api.ok("GET", "/api/foods?q=cr%C3%A8me&limit=100")
    assert creme == [f for f in everything if "crème" in f["name"].lower()][:100]
    assert creme
    upper = api.ok("GET", "/api/foods?q=CREAMY&limit=100")
    assert upper == [f for f in everything if "creamy" in f["name"].lower()][:100]
    assert upper
    both = api.ok("GET", "/api/foods?q=creamy&category_id=3&limit=100")
    assert both == [f for f in upper if f["category_id"] == 3]
    # '%' and '_' are plain characters, not wildcards.
    assert api.ok("GET", "/api/foods?q=%25") == []
    assert api.ok("GET", "/api/foods?q=_") == []
    # An empty q means no filter; an unknown category is simply empty.
    assert api.ok("GET", "/api/foods?q=") == everything[:20]
    assert api.ok("GET", "/api/foods?category_id=999") == []


def test_food_crud(foods):
    api = foods.api
    body = food(unique("Crud "), category_id=4, kcal=61.5, protein=3.25, carbs=4.75, fat=3.5)
    r = api.post("/api/foods", body)
    assert r.status == 201, r
    created = r.json
    check_food_shape(created)
    fid = created["id"]
    assert created == {"id": fid, **body}
    assert r.headers["location"] == f"/api/foods/{fid}"
    assert api.ok("GET", f"/api/foods/{fid}") == created

    changed = food(body["name"] + " v2", category_id=5, kcal=0, protein=0, carbs=0, fat=0)
    assert api.ok("PUT", f"/api/foods/{fid}", changed) == {"id": fid, **changed}
    assert api.ok("GET", f"/api/foods/{fid}") == {"id": fid, **changed}
    # The same values again still count as found (rows matched, not changed).
    assert api.ok("PUT", f"/api/foods/{fid}", changed) == {"id": fid, **changed}

    r = api.delete(f"/api/foods/{fid}")
    assert r.status == 204 and r.body == b""
    api.get(f"/api/foods/{fid}").error(404, "id")
    api.delete(f"/api/foods/{fid}").error(404, "id")
    api.put(f"/api/foods/{fid}", changed).error(404, "id")


def test_food_in_use_cannot_be_deleted(foods):
    api = foods.api
    full = api.ok("GET", "/api/templates/1/full")
    fid = full["items"][0]["food"]["id"]
    api.delete(f"/api/foods/{fid}").error(409, "id")
    assert api.ok("GET", f"/api/foods/{fid}")["id"] == fid


def test_unknown_category_is_422(foods):
    api = foods.api
    name = unique("NoCat ")
    api.post("/api/foods", food(name, category_id=999)).error(422, "category_id")
    assert api.ok("GET", f"/api/foods?q={name.replace(' ', '%20')}") == []
    fid = api.ok("POST", "/api/foods", food(name), status=201)["id"]
    api.put(f"/api/foods/{fid}", food(name, category_id=12345)).error(422, "category_id")
    assert api.ok("GET", f"/api/foods/{fid}")["category_id"] == 1


def test_bulk_insert(foods):
    api = foods.api
    prefix = unique("Bulk")
    items = [food(f"{prefix} {i}", category_id=1 + i % 20, kcal=float(i), protein=i / 10,
                  carbs=1.5, fat=0.25) for i in range(100)]
    r = api.post("/api/foods/bulk", items)
    assert r.status == 201, r
    ids = r.json["ids"]
    assert set(r.json) == {"ids"}
    assert len(ids) == 100 and len(set(ids)) == 100
    assert ids == sorted(ids)
    stored = api.ok("GET", f"/api/foods?q={prefix}&limit=100")
    assert stored == [{"id": i, **it} for i, it in zip(ids, items)]


def test_bulk_is_validated_before_anything_is_written(foods):
    api = foods.api
    prefix = unique("BadBulk")
    items = [food(f"{prefix} {i}") for i in range(50)]
    items[37]["kcal"] = -1
    api.post("/api/foods/bulk", items).error(422, "[37].kcal")
    items[37]["kcal"] = 1
    del items[12]["fat"]
    api.post("/api/foods/bulk", items).error(422, "[12].fat")
    assert api.ok("GET", f"/api/foods?q={prefix}") == []


def test_bulk_is_one_transaction(foods):
    """Item 20 passes validation but names a category that does not exist:
    the database refuses it, and the 20 inserted before are rolled back."""
    api = foods.api
    prefix = unique("TxBulk")
    items = [food(f"{prefix} {i}") for i in range(50)]
    items[20]["category_id"] = 999
    api.post("/api/foods/bulk", items).error(422, "[20].category_id")
    assert api.ok("GET", f"/api/foods?q={prefix}") == []
    # The connection is fine afterwards and the same bulk without the bad
    # item goes through.
    items[20]["category_id"] = 2
    assert len(api.ok("POST", "/api/foods/bulk", items, status=201)["ids"]) == 50


def test_bulk_in_chunks(foods):
    """123 foods go as INSERTs of 100, 10, 10, 1, 1 and 1 rows: the ids come
    back in the order of the items, and a bad category deep in a chunk is
    still named by its index."""
    api = foods.api
    prefix = unique("Chunks")
    items = [food(f"{prefix} {i:03d}", category_id=1 + i % 20, kcal=float(i)) for i in range(123)]
    items[105]["category_id"] = 4242
    api.post("/api/foods/bulk", items).error(422, "[105].category_id")
    items[105]["category_id"] = 5
    items[121]["category_id"] = 4243
    api.post("/api/foods/bulk", items).error(422, "[121].category_id")
    assert api.ok("GET", f"/api/foods?q={prefix}") == []
    items[121]["category_id"] = 6
    ids = api.ok("POST", "/api/foods/bulk", items, status=201)["ids"]
    assert len(ids) == 123 and ids == sorted(ids)
    stored = api.all_foods(f"&q={prefix}")
    assert stored == [{"id": i, **it} for i, it in zip(ids, items)]


def test_bulk_limits(foods):
    api = foods.api
    prefix = unique("Max")
    r = api.post("/api/foods/bulk", [food(f"{prefix} {i}") for i in range(1000)])
    assert r.status == 201, r
    assert len(set(r.json["ids"])) == 1000
    api.post("/api/foods/bulk", [food(f"{prefix} x{i}") for i in range(1001)]).error(422)
    api.post("/api/foods/bulk", []).error(422)
    api.post("/api/foods/bulk", food("not a list")).error(422)
    api.post("/api/foods/bulk", [1]).error(422, "[0]")


def expected_full(api, tid, name, items):
    """The /full document, computed from the other endpoints."""
    cats = {c["id"]: c for c in api.ok("GET", "/api/categories")}
    out = {"id": tid, "name": name, "items": []}
    tot = {"grams": 0.0, "kcal": 0.0, "protein": 0.0, "carbs": 0.0, "fat": 0.0}
    for pos, (fid, grams) in enumerate(items, 1):
        f = api.ok("GET", f"/api/foods/{fid}")
        out["items"].append({"position": pos, "grams": float(grams),
                             "food": {**f, "category": cats[f["category_id"]]}})
        tot["grams"] += grams
        for k in ("kcal", "protein", "carbs", "fat"):
            tot[k] += f[k] * grams / 100.0
    return out, tot


def assert_full(got, want, totals):
    assert set(got) == {"id", "name", "items", "totals"}
    assert {k: got[k] for k in ("id", "name", "items")} == want
    assert set(got["totals"]) == set(totals)
    for k, v in totals.items():
        assert abs(got["totals"][k] - v) <= 0.0051, (k, got["totals"][k], v)


def test_templates_create_list_and_full(foods):
    api = foods.api
    prefix = unique("Tpl")
    ids = api.ok("POST", "/api/foods/bulk", [
        food(f"{prefix} oats", category_id=17, kcal=389, protein=16.9, carbs=66.3, fat=6.9),
        food(f"{prefix} milk", category_id=4, kcal=64, protein=3.4, carbs=4.8, fat=3.6),
        food(f"{prefix} honey", category_id=11, kcal=304, protein=0.3, carbs=82.4, fat=0)],
        status=201)["ids"]
    items = [(ids[0], 60), (ids[1], 250.5), (ids[2], 15)]
    name = f"{prefix} breakfast ☕"
    r = api.post("/api/templates", {"name": name, "items": [
        {"food_id": f, "grams": g} for f, g in items]})
    assert r.status == 201, r
    created = r.json
    tid = created["id"]
    assert created == {"id": tid, "name": name, "items": [
        {"position": i + 1, "food_id": f, "grams": float(g)} for i, (f, g) in enumerate(items)]}
    listed = api.ok("GET", "/api/templates?limit=1000")
    assert {"id": tid, "name": name} in listed
    assert [t["id"] for t in listed] == sorted(t["id"] for t in listed)
    want, totals = expected_full(api, tid, name, items)
    got = api.ok("GET", f"/api/templates/{tid}/full")
    assert_full(got, want, totals)
    # by hand: 389 * 0.6 + 64 * 2.505 + 304 * 0.15
    assert got["totals"]["kcal"] == 439.32
    assert got["totals"]["grams"] == 325.5


def test_seeded_templates_full(foods):
    api = foods.api
    for t in api.ok("GET", "/api/templates?limit=3"):
        got = api.ok("GET", f"/api/templates/{t['id']}/full")
        assert 5 <= len(got["items"]) <= 15
        items = [(it["food"]["id"], it["grams"]) for it in got["items"]]
        want, totals = expected_full(api, t["id"], t["name"], items)
        assert_full(got, want, totals)


def test_template_errors(foods):
    api = foods.api
    before = api.ok("GET", "/api/templates?limit=1000")
    api.post("/api/templates", {"name": unique("BadTpl"), "items": [
        {"food_id": 1, "grams": 10}, {"food_id": 10 ** 12, "grams": 10}]}
    ).error(422, "items[1].food_id")
    assert api.ok("GET", "/api/templates?limit=1000") == before  # nothing written
    api.get("/api/templates/999999/full").error(404, "id")
    api.get("/api/templates/abc/full").error(422, "id")
    api.get("/api/templates/0/full").error(422, "id")
    assert api.ok("GET", "/api/templates?limit=2&offset=1") == before[1:3]


NASTY = [
    "Robert'); DROP TABLE foods;--",
    "' OR '1'='1",
    "1; DELETE FROM categories WHERE 1=1; --",
    "\"; DROP TABLE templates; --",
    "back\\slash \\' \\\" \\\\",
    "percent % underscore _ star * question ?",
    "$1 $2 :name @var ${x}",
    "Crème brûlée — 日本語 — 🍎🍌",
    "\u2028line\u2029separators",
    "x" * 199 + "é",
]


def test_sql_injection_strings_are_stored_verbatim(foods):
    api = foods.api
    before = len(api.all_foods())
    for name in NASTY:
        created = api.ok("POST", "/api/foods", food(name), status=201)
        assert created["name"] == name
        got = api.get(f"/api/foods/{created['id']}")
        assert got.json["name"] == name
        # non-ASCII leaves as UTF-8, not as \u escapes
        if "🍎" in name:
            assert "🍎".encode() in got.body
    ids = api.ok("POST", "/api/foods/bulk", [food(n) for n in NASTY], status=201)["ids"]
    for fid, name in zip(ids, NASTY):
        assert api.ok("GET", f"/api/foods/{fid}")["name"] == name
    # Searching with the same strings finds them and nothing breaks.
    from urllib.parse import quote
    for name in NASTY[:4]:
        hits = api.ok("GET", f"/api/foods?limit=100&q={quote(name)}")
        assert hits and all(name.lower() in h["name"].lower() for h in hits)
    tpl = api.ok("POST", "/api/templates", {"name": NASTY[0], "items": [
        {"food_id": ids[0], "grams": 1}]}, status=201)
    assert api.ok("GET", f"/api/templates/{tpl['id']}/full")["items"][0]["food"]["name"] == NASTY[0]
    assert len(api.ok("GET", "/api/categories")) == 20
    assert len(api.all_foods()) == before + 2 * len(NASTY)


def test_responses_are_valid_utf8_json(foods):
    r = foods.api.get("/api/foods?limit=100")
    text = r.body.decode("utf-8")  # raises on invalid UTF-8
    assert json.loads(text) == r.json
    assert r.headers["content-type"] == "application/json"
