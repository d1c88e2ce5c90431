"""brisk-foods' peer for the race: the same REST API in FastAPI + uvicorn,
on the same schema, the same seed data (same generator) and the same SQL
(one JOIN for a template's full view), written as a FastAPI developer
would: pydantic models with limits, async drivers (aiosqlite, asyncpg,
aiomysql) with a connection pool per worker process, errors reshaped to
brisk-foods' {"error": ..., "field": ...}.

Start it through bench/peers/foods-fastapi/run.sh, which installs the
pinned packages of bench/requirements.txt (fastapi, uvicorn, uvloop,
httptools, aiosqlite, asyncpg, aiomysql) into bench/.venv on first use:
    bench/peers/foods-fastapi/run.sh --listen 127.0.0.1:8001 \
        --db sqlite:/tmp/foods.db --workers 1 --seed 1000
or directly with a Python that has them:
    bench/.venv/bin/python bench/peers/fastapi_foods.py --listen 127.0.0.1:8001 \
        --db sqlite:/tmp/foods.db --workers 1 --seed 1000
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sqlite3
import sys
from contextlib import asynccontextmanager
from typing import List, Optional
from urllib.parse import unquote, urlparse, parse_qs

from fastapi import FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

DB_URL = os.environ.get("FOODS_DB", "sqlite:foods.db")
POOL = int(os.environ.get("FOODS_POOL", "4"))

CATEGORIES = [
    "Fruits", "Vegetables", "Grains", "Dairy", "Meat", "Fish & Seafood", "Legumes",
    "Nuts & Seeds", "Oils & Fats", "Beverages", "Sweets", "Snacks", "Bakery", "Eggs",
    "Herbs & Spices", "Sauces", "Cereals", "Soups", "Fast Food", "Baby Food",
]
ADJECTIVES = ["Fresh", "Organic", "Roasted", "Smoked", "Grilled", "Steamed", "Raw", "Dried",
              "Frozen", "Baked", "Spiced", "Sweet", "Salted", "Crispy", "Creamy", "Wild"]
BASES = ["Apple", "Banana", "Carrot", "Broccoli", "Rice", "Oats", "Yogurt", "Cheese", "Chicken",
         "Beef", "Salmon", "Tuna", "Lentils", "Chickpeas", "Almonds", "Walnuts", "Olive Oil",
         "Butter", "Orange Juice", "Coffee", "Chocolate", "Crackers", "Bread", "Egg", "Basil",
         "Tomato Sauce", "Muesli", "Soup", "Burger", "Purée", "Jalapeño", "Crème Fraîche"]
MEALS = ["Breakfast", "Lunch", "Dinner", "Snack", "Brunch", "Supper"]

FOOD_COLS = "id, name, category_id, kcal, protein, carbs, fat"


def kind_of(url):
    if url.startswith("sqlite:"):
        return "sqlite"
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql"
    if url.startswith(("mysql://", "mariadb://")):
        return "mysql"
    raise SystemExit(f"unknown database URL {url!r}")


KIND = kind_of(DB_URL)


def sql(text):
    """'?' placeholders in the dialect of the driver."""
    if KIND == "sqlite":
        return text
    out, n = [], 0
    for ch in text:
        if ch == "?":
            n += 1
            out.append(f"${n}" if KIND == "postgresql" else "%s")
        else:
            out.append(ch)
    return "".join(out)


Q = {"sqlite": "instr(lower(name), lower(?)) > 0",
     "postgresql": "strpos(lower(name), lower(?)) > 0",
     "mysql": "INSTR(LOWER(name), LOWER(?)) > 0"}[KIND]
LAST_TEMPLATE = {"sqlite": "last_insert_rowid()",
                 "postgresql": "currval(pg_get_serial_sequence('templates', 'id'))",
                 "mysql": "LAST_INSERT_ID()"}[KIND]

S = {
    "ping": sql("SELECT 1"),
    "categories": sql("SELECT id, name FROM categories ORDER BY id"),
    "list": sql(f"SELECT {FOOD_COLS} FROM foods ORDER BY id LIMIT ? OFFSET ?"),
    "list_cat": sql(f"SELECT {FOOD_COLS} FROM foods WHERE category_id = ? ORDER BY id LIMIT ? OFFSET ?"),
    "list_q": sql(f"SELECT {FOOD_COLS} FROM foods WHERE {Q} ORDER BY id LIMIT ? OFFSET ?"),
    "list_cat_q": sql(f"SELECT {FOOD_COLS} FROM foods WHERE category_id = ? AND {Q} "
                      "ORDER BY id LIMIT ? OFFSET ?"),
    "get": sql(f"SELECT {FOOD_COLS} FROM foods WHERE id = ?"),
    "insert": sql("INSERT INTO foods (name, category_id, kcal, protein, carbs, fat) "
                  "VALUES (?, ?, ?, ?, ?, ?) RETURNING id"),
    "update": sql("UPDATE foods SET name = ?, category_id = ?, kcal = ?, protein = ?, carbs = ?, "
                  "fat = ? WHERE id = ?"),
    "delete": sql("DELETE FROM foods WHERE id = ?"),
    "templates": sql("SELECT id, name FROM templates ORDER BY id LIMIT ? OFFSET ?"),
    "template_insert": sql("INSERT INTO templates (name) VALUES (?) RETURNING id"),
    "item_add": sql(f"INSERT INTO template_items (template_id, position, food_id, grams) "
                    f"VALUES ({LAST_TEMPLATE}, ?, ?, ?)"),
    "full": sql("SELECT t.id, t.name, i.position, i.grams, f.id, f.name, f.category_id, f.kcal, "
                "f.protein, f.carbs, f.fat, c.name FROM templates t "
                "LEFT JOIN template_items i ON i.template_id = t.id "
                "LEFT JOIN foods f ON f.id = i.food_id "
                "LEFT JOIN categories c ON c.id = f.category_id "
                "WHERE t.id = ? ORDER BY i.position"),
}

DDL = {
    "sqlite": [
        "CREATE TABLE IF NOT EXISTS categories (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
        "CREATE TABLE IF NOT EXISTS foods (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL,"
        " category_id INTEGER NOT NULL REFERENCES categories(id), kcal REAL NOT NULL,"
        " protein REAL NOT NULL, carbs REAL NOT NULL, fat REAL NOT NULL)",
        "CREATE INDEX IF NOT EXISTS foods_category ON foods(category_id)",
        "CREATE TABLE IF NOT EXISTS templates (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS template_items ("
        " template_id INTEGER NOT NULL REFERENCES templates(id) ON DELETE CASCADE,"
        " position INTEGER NOT NULL, food_id INTEGER NOT NULL REFERENCES foods(id),"
        " grams REAL NOT NULL, PRIMARY KEY (template_id, position)) WITHOUT ROWID",
        "CREATE INDEX IF NOT EXISTS template_items_food ON template_items(food_id)",
    ],
    "postgresql": [
        "CREATE TABLE IF NOT EXISTS categories (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
        "CREATE TABLE IF NOT EXISTS foods (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL,"
        " category_id INTEGER NOT NULL REFERENCES categories(id), kcal DOUBLE PRECISION NOT NULL,"
        " protein DOUBLE PRECISION NOT NULL, carbs DOUBLE PRECISION NOT NULL,"
        " fat DOUBLE PRECISION NOT NULL)",
        "CREATE INDEX IF NOT EXISTS foods_category ON foods(category_id)",
        "CREATE TABLE IF NOT EXISTS templates (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS template_items ("
        " template_id BIGINT NOT NULL REFERENCES templates(id) ON DELETE CASCADE,"
        " position INTEGER NOT NULL, food_id BIGINT NOT NULL REFERENCES foods(id),"
        " grams DOUBLE PRECISION NOT NULL, PRIMARY KEY (template_id, position))",
        "CREATE INDEX IF NOT EXISTS template_items_food ON template_items(food_id)",
    ],
    "mysql": [
        "CREATE TABLE IF NOT EXISTS categories (id INT PRIMARY KEY, name VARCHAR(100) NOT NULL UNIQUE)"
        " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
        "CREATE TABLE IF NOT EXISTS foods (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
        " name VARCHAR(200) NOT NULL, category_id INT NOT NULL, kcal DOUBLE NOT NULL,"
        " protein DOUBLE NOT NULL, carbs DOUBLE NOT NULL, fat DOUBLE NOT NULL,"
        " INDEX foods_category (category_id), FOREIGN KEY (category_id) REFERENCES categories(id))"
        " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
        "CREATE TABLE IF NOT EXISTS templates (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
        " name VARCHAR(200) NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
        "CREATE TABLE IF NOT EXISTS template_items (template_id BIGINT NOT NULL,"
        " position INT NOT NULL, food_id BIGINT NOT NULL, grams DOUBLE NOT NULL,"
        " PRIMARY KEY (template_id, position), INDEX template_items_food (food_id),"
        " FOREIGN KEY (template_id) REFERENCES templates(id) ON DELETE CASCADE,"
        " FOREIGN KEY (food_id) REFERENCES foods(id))"
        " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    ],
}


# ---------------------------------------------------------------- seed
class SplitMix64:
    MASK = (1 << 64) - 1

    def __init__(self, seed):
        self.state = seed

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & self.MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & self.MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & self.MASK
        return z ^ (z >> 31)


def seed_rows(n):
    """The foods and templates of `brisk-foods --seed n`, value for value."""
    rng = SplitMix64(0x5EED)
    foods = []
    for i in range(n):
        adj = ADJECTIVES[rng.next() % 16]
        base = BASES[rng.next() % 32]
        cat = 1 + rng.next() % 20
        total = rng.next() % 1000
        a = rng.next() % 101
        b = rng.next() % (101 - a)
        p, c = total * a // 100, total * b // 100
        f = total - p - c
        foods.append((f"{adj} {base} {i + 1}", cat, (4 * p + 4 * c + 9 * f) / 10.0,
                      p / 10.0, c / 10.0, f / 10.0))
    templates = []
    for t in range(max(1, n // 10)):
        name = f"{MEALS[rng.next() % 6]} plan {t + 1}"
        items = []
        for k in range(5 + rng.next() % 11):
            items.append((k + 1, rng.next() % n, float(10 * (1 + rng.next() % 30))))
        templates.append((name, items))
    return foods, templates


# ------------------------------------------------------------ database
class Database:
    """One small interface over aiosqlite, asyncpg and aiomysql."""

    async def open(self):
        if KIND == "sqlite":
            import aiosqlite
            path = DB_URL.split(":", 1)[1]
            if path.startswith("//"):
                path = path[2:]
            # aiosqlite runs each connection on its own thread: a few of them
            # let reads proceed while a write waits for the lock.
            self.conns = asyncio.Queue()
            for _ in range(POOL):
                c = await aiosqlite.connect(path, isolation_level=None)
                for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON",
                               "busy_timeout=5000"):
                    await c.execute(f"PRAGMA {pragma}")
                self.conns.put_nowait(c)
        elif KIND == "postgresql":
            import asyncpg
            self.pool = await asyncpg.create_pool(DB_URL, min_size=POOL, max_size=POOL)
        else:
            import aiomysql
            u = urlparse(DB_URL)
            qs = parse_qs(u.query)
            self.pool = await aiomysql.create_pool(
                host=u.hostname or "localhost", port=u.port or 3306,
                user=unquote(u.username or "root"), password=unquote(u.password or ""),
                db=u.path.lstrip("/"), unix_socket=qs.get("socket", [None])[0],
                minsize=POOL, maxsize=POOL, charset="utf8mb4", autocommit=True,
                client_flag=2)  # CLIENT_FOUND_ROWS

    async def close(self):
        if KIND == "sqlite":
            while not self.conns.empty():
                await self.conns.get_nowait().close()
        elif KIND == "postgresql":
            await self.pool.close()
        else:
            self.pool.close()
            await self.pool.wait_closed()

    async def fetch(self, q, *args):
        if KIND == "sqlite":
            c = await self.conns.get()
            try:
                async with c.execute(q, args) as cur:
                    return await cur.fetchall()
            finally:
                self.conns.put_nowait(c)
        if KIND == "postgresql":
            async with self.pool.acquire() as c:
                return await c.fetch(q, *args)
        async with self.pool.acquire() as c:
            async with c.cursor() as cur:
                await cur.execute(q, args)
                return await cur.fetchall()

    async def execute(self, q, *args):
        """Rows affected."""
        return (await self.transaction([(q, args)]))[0][1]

    async def transaction(self, stmts):
        """Runs [(sql, args)] all or nothing; [(rows, rowcount)] per statement.
        Raises IntegrityError-like exceptions as Conflict(index)."""
        out = []
        if KIND == "sqlite":
            c = await self.conns.get()
            try:
                await c.execute("BEGIN IMMEDIATE")
                try:
                    for i, (q, args) in enumerate(stmts):
                        try:
                            async with c.execute(q, args) as cur:
                                rows = await cur.fetchall()
                                out.append((rows, cur.rowcount))
                        except sqlite3.IntegrityError as e:
                            raise Conflict(i) from e
                    await c.execute("COMMIT")
                except BaseException:
                    await c.execute("ROLLBACK")
                    raise
            finally:
                self.conns.put_nowait(c)
            return out
        if KIND == "postgresql":
            import asyncpg
            async with self.pool.acquire() as c:
                async with c.transaction():
                    for i, (q, args) in enumerate(stmts):
                        try:
                            if "RETURNING" in q:
                                out.append((await c.fetch(q, *args), 1))
                            else:
                                status = await c.execute(q, *args)
                                out.append(([], int(status.split()[-1])))
                        except asyncpg.IntegrityConstraintViolationError as e:
                            raise Conflict(i) from e
            return out
        import pymysql
        async with self.pool.acquire() as c:
            await c.begin()
            try:
                async with c.cursor() as cur:
                    for i, (q, args) in enumerate(stmts):
                        try:
                            n = await cur.execute(q, args)
                        except pymysql.err.IntegrityError as e:
                            raise Conflict(i) from e
                        out.append((await cur.fetchall() if cur.description else [], n))
                await c.commit()
            except BaseException:
                await c.rollback()
                raise
        return out


class Conflict(Exception):
    def __init__(self, index):
        self.index = index


def setup_schema(seed):
    """Schema, categories and seed data, before the workers start."""
    async def run():
        db = Database()
        await db.open()
        try:
            if KIND == "sqlite":
                c = await db.conns.get()
                for d in DDL["sqlite"]:
                    await c.execute(d)
                db.conns.put_nowait(c)
            elif KIND == "postgresql":
                async with db.pool.acquire() as c:
                    for d in DDL["postgresql"]:
                        await c.execute(d)
            else:
                async with db.pool.acquire() as c:
                    async with c.cursor() as cur:
                        for d in DDL["mysql"]:
                            await cur.execute(d)
            if (await db.fetch(sql("SELECT COUNT(*) FROM categories")))[0][0] == 0:
                await db.transaction([(sql("INSERT INTO categories (id, name) VALUES (?, ?)"),
                                       (i + 1, n)) for i, n in enumerate(CATEGORIES)])
            if seed and (await db.fetch(sql("SELECT COUNT(*) FROM foods")))[0][0] == 0:
                foods, templates = seed_rows(seed)
                res = await db.transaction([(S["insert"], f) for f in foods])
                ids = [rows[0][0] for rows, _ in res]
                stmts = []
                for name, items in templates:
                    stmts.append((S["template_insert"], (name,)))
                    stmts += [(S["item_add"], (pos, ids[idx], g)) for pos, idx, g in items]
                await db.transaction(stmts)
        finally:
            await db.close()
    asyncio.run(run())


# ----------------------------------------------------------------- API
db = Database()


@asynccontextmanager
async def lifespan(app):
    await db.open()
    yield
    await db.close()


app = FastAPI(title="brisk-foods (FastAPI peer)", lifespan=lifespan)


class FoodIn(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    category_id: int = Field(ge=1, le=2147483647)
    kcal: float = Field(ge=0, le=900)
    protein: float = Field(ge=0, le=100)
    carbs: float = Field(ge=0, le=100)
    fat: float = Field(ge=0, le=100)


class ItemIn(BaseModel):
    food_id: int = Field(ge=1, le=9007199254740991)
    grams: float = Field(gt=0, le=10000)


class TemplateIn(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    items: List[ItemIn] = Field(min_length=1, max_length=100)


def error(status, msg, field=None):
    return JSONResponse({"error": msg, "field": field}, status_code=status)


@app.exception_handler(RequestValidationError)
async def validation_error(request: Request, exc: RequestValidationError):
    e = exc.errors()[0]
    loc = [str(x) for x in e["loc"] if x not in ("body", "query", "path")]
    field = None
    if loc:
        field = "".join(f"[{x}]" if x.isdigit() else f".{x}" for x in loc).lstrip(".")
    status = 400 if e["type"] == "json_invalid" else 422
    return error(status, e["msg"], field)


def unavailable():
    return error(503, "database unavailable")


def food_row(r):
    return {"id": r[0], "name": r[1], "category_id": r[2], "kcal": float(r[3]),
            "protein": float(r[4]), "carbs": float(r[5]), "fat": float(r[6])}


@app.get("/api/health")
async def health():
    try:
        await db.fetch(S["ping"])
        return {"status": "ok", "database": KIND}
    except Exception:
        return JSONResponse({"status": "unavailable", "database": KIND}, status_code=503)


@app.get("/api/categories")
async def categories():
    return [{"id": r[0], "name": r[1]} for r in await db.fetch(S["categories"])]


@app.get("/api/foods")
async def list_foods(category_id: Optional[int] = Query(None, ge=1, le=2147483647),
                     q: Optional[str] = Query(None, max_length=100),
                     limit: int = Query(20, ge=1, le=100),
                     offset: int = Query(0, ge=0, le=1000000000)):
    if category_id and q:
        rows = await db.fetch(S["list_cat_q"], category_id, q, limit, offset)
    elif category_id:
        rows = await db.fetch(S["list_cat"], category_id, limit, offset)
    elif q:
        rows = await db.fetch(S["list_q"], q, limit, offset)
    else:
        rows = await db.fetch(S["list"], limit, offset)
    return [food_row(r) for r in rows]


@app.get("/api/foods/{id}")
async def get_food(id: int = Path(ge=1, le=9007199254740991)):
    rows = await db.fetch(S["get"], id)
    if not rows:
        return error(404, "food not found", "id")
    return food_row(rows[0])


def food_args(f: FoodIn):
    return (f.name, f.category_id, f.kcal, f.protein, f.carbs, f.fat)


@app.post("/api/foods", status_code=201)
async def create_food(f: FoodIn):
    try:
        res = await db.transaction([(S["insert"], food_args(f))])
    except Conflict:
        return error(422, "unknown category", "category_id")
    fid = res[0][0][0][0]
    return JSONResponse({"id": fid, **f.model_dump()}, status_code=201,
                        headers={"Location": f"/api/foods/{fid}"})


@app.put("/api/foods/{id}")
async def replace_food(f: FoodIn, id: int = Path(ge=1, le=9007199254740991)):
    try:
        n = await db.execute(S["update"], *food_args(f), id)
    except Conflict:
        return error(422, "unknown category", "category_id")
    if n == 0:
        return error(404, "food not found", "id")
    return {"id": id, **f.model_dump()}


@app.delete("/api/foods/{id}", status_code=204)
async def delete_food(id: int = Path(ge=1, le=9007199254740991)):
    try:
        n = await db.execute(S["delete"], id)
    except Conflict:
        return error(409, "food is used by a template", "id")
    if n == 0:
        return error(404, "food not found", "id")
    return Response(status_code=204)


@app.post("/api/foods/bulk", status_code=201)
async def bulk(foods: List[FoodIn] = ...):
    if not 1 <= len(foods) <= 1000:
        return error(422, "must hold 1 to 1000 foods")
    try:
        res = await db.transaction([(S["insert"], food_args(f)) for f in foods])
    except Conflict as c:
        return error(422, "unknown category", f"[{c.index}].category_id")
    return JSONResponse({"ids": [rows[0][0] for rows, _ in res]}, status_code=201)


@app.get("/api/templates")
async def templates(limit: int = Query(100, ge=1, le=1000),
                    offset: int = Query(0, ge=0, le=1000000000)):
    return [{"id": r[0], "name": r[1]} for r in await db.fetch(S["templates"], limit, offset)]


@app.post("/api/templates", status_code=201)
async def create_template(t: TemplateIn):
    stmts = [(S["template_insert"], (t.name,))]
    stmts += [(S["item_add"], (i + 1, it.food_id, it.grams)) for i, it in enumerate(t.items)]
    try:
        res = await db.transaction(stmts)
    except Conflict as c:
        return error(422, "unknown food", f"items[{c.index - 1}].food_id")
    return JSONResponse({"id": res[0][0][0][0], "name": t.name, "items": [
        {"position": i + 1, "food_id": it.food_id, "grams": it.grams}
        for i, it in enumerate(t.items)]}, status_code=201)


@app.get("/api/templates/{id}/full")
async def template_full(id: int = Path(ge=1, le=9007199254740991)):
    rows = await db.fetch(S["full"], id)
    if not rows:
        return error(404, "template not found", "id")
    tot = {"grams": 0.0, "kcal": 0.0, "protein": 0.0, "carbs": 0.0, "fat": 0.0}
    items = []
    for r in rows:
        if r[2] is None:
            continue
        g = float(r[3])
        f = {"id": r[4], "name": r[5], "category_id": r[6], "kcal": float(r[7]),
             "protein": float(r[8]), "carbs": float(r[9]), "fat": float(r[10]),
             "category": {"id": r[6], "name": r[11]}}
        tot["grams"] += g
        for k in ("kcal", "protein", "carbs", "fat"):
            tot[k] += f[k] * g / 100.0
        items.append({"position": r[2], "grams": g, "food": f})
    return {"id": rows[0][0], "name": rows[0][1], "items": items,
            "totals": {k: round(v, 2) for k, v in tot.items()}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", default="127.0.0.1:8001")
    ap.add_argument("--db", default="sqlite:foods.db")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pool", type=int, default=4, help="connections per worker")
    a = ap.parse_args()
    # The settings reach uvicorn's worker processes through the environment;
    # the module is imported again by name so it reads them.
    os.environ["FOODS_DB"] = a.db
    os.environ["FOODS_POOL"] = str(a.pool)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    importlib.import_module("fastapi_foods").setup_schema(a.seed)
    host, port = a.listen.rsplit(":", 1)
    import uvicorn
    uvicorn.run("fastapi_foods:app", host=host.strip("[]"), port=int(port), workers=a.workers,
                log_level="warning", access_log=False, app_dir=here)


if __name__ == "__main__":
    main()
