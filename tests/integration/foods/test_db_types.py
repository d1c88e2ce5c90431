"""src/db's values for columns of many types, each statement run three times
on one connection: on PostgreSQL the first run comes back in text and the
later ones in binary (when every column allows it); all must agree."""
import subprocess

import pytest

from foods_lib import BIN_DIR

EXPECTED = {
    0: "i:1 i:2 i:-3 i:9007199254740993 d:0.10000000000000001 t:x t:ab null t:h\u00e9\"llo",
    1: {"sqlite": "i:7 d:0.10000000000000001 d:1.25",
        "postgresql": "i:7 d:0.10000000000000001 d:1.25 t:2020-01-02",
        "mysql": "i:7 d:0.10000000000000001 d:1.25"},
}


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mysql"])
def test_column_types_text_then_binary(dbs, backend):
    url = dbs.fresh(backend)
    p = subprocess.run([str(BIN_DIR / "db_types"), url], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 6, p.stdout
    for stmt in (0, 1):
        runs = [ln.split(":", 1)[1].strip() for ln in lines if ln.startswith(f"stmt {stmt}:")]
        assert len(runs) == 3 and runs[0] == runs[1] == runs[2], runs
        want = EXPECTED[stmt] if stmt == 0 else EXPECTED[stmt][backend]
        assert runs[0] == want
