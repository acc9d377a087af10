"""No token reaches the server's logs, at any log level: uvicorn's trace level logs every
request's path, query string and headers (cookie, Authorization)."""

from __future__ import annotations

import httpx
from e2e.human_helpers import ADMIN_TOKEN, make_dataset, start_server, stop_server, write_study

from vocalgrad.human.store import Store


def test_tokens_never_reach_the_logs(tmp_path):
    dataset = make_dataset(tmp_path / "ds", seconds=0.2, n_sources=2, tiers=("high",))
    study = write_study(tmp_path / "study.toml", n_annotators=2, annotators_per_item=1)
    proc, base = start_server(dataset, study, ("--log-level", "trace"))
    try:
        store = Store(tmp_path / "study.sqlite")
        _, token = store.invite()
        _, other = store.invite()
        assert httpx.get(f"{base}/s/{token}", follow_redirects=False).status_code == 303
        with httpx.Client(base_url=base) as c:
            c.cookies.set("vg_session", token)
            assert c.get("/api/state").status_code == 200
            assert c.get(f"/api/state?token={token}").status_code == 200
        assert (
            httpx.get(f"{base}/api/state", headers={"Authorization": f"Bearer {other}"}).status_code
            == 200
        )
        assert (
            httpx.get(
                f"{base}/admin/api/progress", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
            ).status_code
            == 200
        )
    finally:
        stop_server(proc)
    log = proc.stdout.read() if proc.stdout else ""
    assert "GET /s/[redacted]" in log and "TRACE" in log  # the requests were logged, at trace level
    for secret in (token, other, ADMIN_TOKEN):
        assert secret not in log
