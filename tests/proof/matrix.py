"""Who may call what: the access matrix as data, the one source for the test and the docs.

Each row is an endpoint; each column an actor; each cell `ok` (2xx) or the status a refused
caller gets. `tests/proof/test_access_matrix.py` calls every cell against a live world and
checks that every endpoint the URL resolver knows has a row; docs/security.md carries the same
table, rendered by `render_markdown()`:

    .venv/bin/python -m tests.proof.matrix   # prints the table for docs/security.md

Rows whose owner is a `page_…` kind are web pages, visited with a browser session (an API key
logs nobody in to a page): there `ok` is a 2xx or a form's redirect to anywhere but the log-in
page, and `login` is the redirect to the log-in page that a page gives a caller it does not
know.
"""

import re

ACTORS = (
    "anonymous",
    "owner",
    "other_submitter",
    "other_operator",
    "other_agent",
    "finance",
    "admin",
)
HEADINGS = {
    "anonymous": "anonymous",
    "owner": "owner",
    "other_submitter": "another submitter",
    "other_operator": "another operator",
    "other_agent": "another node's agent",
    "finance": "finance",
    "admin": "admin",
}
# Who "owner" is, per row: the principal whose object it is, or the endpoint's natural caller.
OWNERS = {
    "self": "the caller (alice's submitter key)",
    "submitter": "alice (submitter key): her job, its logs, artifacts and webhook",
    "operator": "bob (operator key): his node",
    "cashout": "bob (operator key): his cashout",
    "agent": "bob's node (agent key), holding the lease",
    "provider": "the payment provider (a valid signature)",
    "public": "anyone",
    "finance": "alice (submitter key): no object; finance acts",
    "catalog": "alice (submitter key): no object; the models the pool serves",
    "model_file": "bob's node (agent key), which can hold the model",
    "relay": "alice (submitter key): let through; no node serves in this world, so 429",
    "relay_push": "bob's node (agent key), holding the request in the relay",
    "benchmark": "bob's node (agent key), reporting the benchmark it took",
    "page_public": "anyone (a page: every caller with their browser session, or none)",
    "page_self": "alice (her browser session): her own account and keys",
    "page_reset": "anyone, holding alice's valid password-reset link",
    "page_operator": "bob (his browser session): his node, earnings and cashouts",
    "page_finance": "bob (his browser session): his cashouts, which finance decides and exports",
    "page_submitter": "alice (her browser session): her jobs, their outputs, her credits",
}
# Owner kinds of the rows that are web pages (see the module's docstring).
PAGE_OWNERS = {
    "page_public", "page_self", "page_reset", "page_operator", "page_finance", "page_submitter"
}  # fmt: skip

# endpoint -> (owner, the cells in ACTORS order). 401: not authenticated; 403: the credential's
# role may not call it; 404: the object is someone else's (answered exactly like a missing one);
# 409: an agent endpoint given an attempt that is not leased to the calling node (answered
# exactly like a missing attempt or a stale token).
MATRIX: dict[str, tuple[str, str]] = {
    # people
    "GET /api/v1/me": ("self", "401 ok ok ok 403 ok ok"),
    "GET /api/v1/keys/": ("self", "401 ok ok ok 403 ok ok"),
    "POST /api/v1/keys/": ("self", "401 ok ok ok 403 ok ok"),
    "POST /api/v1/keys/{key_id}/revoke": ("self", "401 ok 404 404 403 404 404"),
    # nodes, as their operator sees them
    "GET /api/v1/nodes/": ("operator", "401 ok 403 ok 403 403 403"),
    "POST /api/v1/nodes/": ("operator", "401 ok 403 ok 403 403 403"),
    "GET /api/v1/nodes/{node_id}": ("operator", "401 ok 403 404 403 403 403"),
    "PATCH /api/v1/nodes/{node_id}": ("operator", "401 ok 403 404 403 403 403"),
    "POST /api/v1/nodes/{node_id}/pause": ("operator", "401 ok 403 404 403 403 403"),
    "POST /api/v1/nodes/{node_id}/resume": ("operator", "401 ok 403 404 403 403 403"),
    "POST /api/v1/nodes/{node_id}/retire": ("operator", "401 ok 403 404 403 403 403"),
    "GET /api/v1/nodes/{node_id}/history": ("operator", "401 ok 403 404 403 403 403"),
    # the agent's side: a node acts only as itself
    "GET /api/v1/agent/me": ("agent", "401 ok 403 403 ok 403 403"),
    "POST /api/v1/agent/heartbeat": ("agent", "401 ok 403 403 ok 403 403"),
    # The figures of the node's own operator: another node's agent reads its own operator's.
    "GET /api/v1/agent/earnings": ("agent", "401 ok 403 403 ok 403 403"),
    "GET /api/v1/agent/benchmark": ("agent", "401 ok 403 403 ok 403 403"),
    # Another node's agent reporting it is refused as a benchmark it does not have (409).
    "POST /api/v1/agent/benchmark/{benchmark_id}": ("benchmark", "401 ok 403 403 409 403 403"),
    "POST /api/v1/agent/claim": ("agent", "401 ok 403 403 ok 403 403"),
    "POST /api/v1/agent/attempts/{attempt_id}/progress": ("agent", "401 ok 403 403 409 403 403"),
    "POST /api/v1/agent/attempts/{attempt_id}/log": ("agent", "401 ok 403 403 409 403 403"),
    "POST /api/v1/agent/attempts/{attempt_id}/artifacts": (
        "agent",
        "401 ok 403 403 409 403 403",
    ),
    "POST /api/v1/agent/attempts/{attempt_id}/complete": ("agent", "401 ok 403 403 409 403 403"),
    "POST /api/v1/agent/attempts/{attempt_id}/fail": ("agent", "401 ok 403 403 409 403 403"),
    "POST /api/v1/agent/attempts/{attempt_id}/hand-back": (
        "agent",
        "401 ok 403 403 409 403 403",
    ),
    # jobs, as their submitter sees them
    "GET /api/v1/jobs/": ("submitter", "401 ok ok 403 403 403 403"),
    "POST /api/v1/jobs/": ("submitter", "401 ok ok 403 403 403 403"),
    "GET /api/v1/jobs/{job_id}": ("submitter", "401 ok 404 403 403 403 403"),
    "POST /api/v1/jobs/{job_id}/cancel": ("submitter", "401 ok 404 403 403 403 403"),
    "GET /api/v1/jobs/{job_id}/logs": ("submitter", "401 ok 404 403 403 403 403"),
    "GET /api/v1/jobs/{job_id}/timeline": ("submitter", "401 ok 404 403 403 403 403"),
    "GET /api/v1/artifacts/{artifact_id}/download": ("submitter", "401 ok 404 403 403 403 403"),
    # completion webhooks: of the submitter's own jobs, signed with the submitter's own secret
    "GET /api/v1/jobs/{job_id}/webhook": ("submitter", "401 ok 404 403 403 403 403"),
    "POST /api/v1/jobs/{job_id}/webhook/redeliver": ("submitter", "401 ok 404 403 403 403 403"),
    "GET /api/v1/webhooks/secret": ("self", "401 ok ok 403 403 403 403"),
    "POST /api/v1/webhooks/secret/rotate": ("self", "401 ok ok 403 403 403 403"),
    # credits
    "POST /api/v1/credits/grants": ("finance", "401 403 403 403 403 ok ok"),
    "POST /api/v1/credits/webhook": ("provider", "401 ok 401 401 401 401 401"),
    "GET /api/v1/credits/me": ("self", "401 ok ok ok 403 ok ok"),
    "GET /api/v1/quote": ("self", "401 ok ok ok 403 ok ok"),
    "GET /api/v1/statements/me": ("self", "401 ok ok ok 403 ok ok"),
    # cashouts: the operator's own, every one for finance
    "GET /api/v1/cashouts/": ("cashout", "401 ok 403 ok 403 ok ok"),
    "POST /api/v1/cashouts/": ("cashout", "401 ok 403 ok 403 403 403"),
    "GET /api/v1/cashouts/{cashout_id}": ("cashout", "401 ok 403 404 403 ok ok"),
    "POST /api/v1/cashouts/{cashout_id}/approve": ("cashout", "401 403 403 403 403 ok ok"),
    "POST /api/v1/cashouts/{cashout_id}/reject": ("cashout", "401 403 403 403 403 ok ok"),
    "POST /api/v1/cashouts/{cashout_id}/paid": ("cashout", "401 403 403 403 403 ok ok"),
    # finance exports
    "GET /api/v1/exports/": ("finance", "401 403 403 403 403 ok ok"),
    "POST /api/v1/exports/": ("finance", "401 403 403 403 403 ok ok"),
    "GET /api/v1/exports/{export_id}": ("finance", "401 403 403 403 403 ok ok"),
    "GET /api/v1/exports/{export_id}/download": ("finance", "401 403 403 403 403 ok ok"),
    # public by design
    "GET /api/v1/schema": ("public", "ok ok ok ok ok ok ok"),
    # inference, OpenAI-compatible (errors in OpenAI's shape)
    "GET /v1/models": ("catalog", "401 ok ok 403 403 403 403"),
    "POST /v1/chat/completions": ("relay", "401 429 429 403 403 403 403"),
    "POST /v1/completions": ("relay", "401 429 429 403 403 403 403"),
    "POST /api/v1/agent/inference/poll": ("agent", "401 ok 403 403 ok 403 403"),
    # Any key but the holding node's is refused, as a request it does not hold (409).
    "POST /api/v1/agent/inference/push": ("relay_push", "401 ok 409 409 409 409 409"),
    # a model's file, for any node that can hold it (mallory's can too)
    "GET /api/v1/agent/models/{name}": ("model_file", "401 ok 403 403 ok 403 403"),
    "GET /api/v1/docs": ("public", "ok ok ok ok ok ok ok"),
    "GET /healthz": ("public", "ok ok ok ok ok ok ok"),
    "GET /metrics": ("public", "ok ok ok ok ok ok ok"),
    # web pages (web/): public ones, the account's own, the forms that log in and out
    "GET /": ("page_public", "ok ok ok ok ok ok ok"),
    "GET /signup/": ("page_public", "ok ok ok ok ok ok ok"),
    "POST /signup/": ("page_public", "ok ok ok ok ok ok ok"),
    "GET /login/": ("page_public", "ok ok ok ok ok ok ok"),
    "POST /login/": ("page_public", "ok ok ok ok ok ok ok"),
    "POST /logout/": ("page_public", "ok ok ok ok ok ok ok"),
    "GET /password-reset/": ("page_public", "ok ok ok ok ok ok ok"),
    "POST /password-reset/": ("page_public", "ok ok ok ok ok ok ok"),
    "GET /password-reset/sent/": ("page_public", "ok ok ok ok ok ok ok"),
    "GET /reset/{uidb64}/{token}/": ("page_reset", "ok ok ok ok ok ok ok"),
    "POST /reset/{uidb64}/{token}/": ("page_reset", "ok ok ok ok ok ok ok"),
    "GET /reset/done/": ("page_public", "ok ok ok ok ok ok ok"),
    "GET /network/": ("page_public", "ok ok ok ok ok ok ok"),
    "GET /account/": ("page_self", "login ok ok ok login ok ok"),
    "GET /account/keys/": ("page_self", "login ok ok ok login ok ok"),
    "POST /account/keys/": ("page_self", "login ok ok ok login ok ok"),
    "POST /account/keys/{key_id}/revoke/": ("page_self", "login ok 404 404 login 404 404"),
    # the name an operator shows on the network page's leaderboard: their own only
    "POST /account/public-name/": ("page_operator", "login ok 403 ok login 403 403"),
    # an operator's pages: their own nodes, earnings and cashouts only
    "GET /nodes/": ("page_operator", "login ok 403 ok login 403 403"),
    "GET /nodes/add/": ("page_operator", "login ok 403 ok login 403 403"),
    "POST /nodes/add/": ("page_operator", "login ok 403 ok login 403 403"),
    "GET /nodes/{node_id}/": ("page_operator", "login ok 403 404 login 403 403"),
    "POST /nodes/{node_id}/price-floor/": ("page_operator", "login ok 403 404 login 403 403"),
    "POST /nodes/{node_id}/pause/": ("page_operator", "login ok 403 404 login 403 403"),
    "POST /nodes/{node_id}/resume/": ("page_operator", "login ok 403 404 login 403 403"),
    "POST /nodes/{node_id}/retire/": ("page_operator", "login ok 403 404 login 403 403"),
    "GET /earnings/": ("page_operator", "login ok 403 ok login 403 403"),
    "GET /earnings/cashout/": ("page_operator", "login ok 403 ok login 403 403"),
    "POST /earnings/cashout/": ("page_operator", "login ok 403 ok login 403 403"),
    # finance's pages
    "GET /finance/cashouts/": ("page_finance", "login 403 403 403 login ok ok"),
    "POST /finance/cashouts/{cashout_id}/approve/": (
        "page_finance",
        "login 403 403 403 login ok ok",
    ),
    "POST /finance/cashouts/{cashout_id}/reject/": (
        "page_finance",
        "login 403 403 403 login ok ok",
    ),
    "POST /finance/cashouts/{cashout_id}/paid/": ("page_finance", "login 403 403 403 login ok ok"),
    "GET /finance/exports/": ("page_finance", "login 403 403 403 login ok ok"),
    "POST /finance/exports/": ("page_finance", "login 403 403 403 login ok ok"),
    "GET /finance/exports/{export_id}/": ("page_finance", "login 403 403 403 login ok ok"),
    "GET /finance/exports/{export_id}/download/": (
        "page_finance",
        "login 403 403 403 login ok ok",
    ),
    "GET /finance/exports/{export_id}/head/": ("page_finance", "login 403 403 403 login ok ok"),
    "GET /finance/statements/": ("page_finance", "login 403 403 403 login ok ok"),
    # a submitter's pages (web/job_pages.py, web/job_new.py, web/credits.py)
    "GET /jobs/": ("page_submitter", "login ok ok 403 login 403 403"),
    "GET /jobs/new/": ("page_submitter", "login ok ok 403 login 403 403"),
    "POST /jobs/new/": ("page_submitter", "login ok ok 403 login 403 403"),
    "GET /jobs/new/quote/": ("page_submitter", "login ok ok 403 login 403 403"),
    "GET /jobs/{job_id}/": ("page_submitter", "login ok 404 403 login 403 403"),
    "GET /jobs/{job_id}/live/": ("page_submitter", "login ok 404 403 login 403 403"),
    "POST /jobs/{job_id}/cancel/": ("page_submitter", "login ok 404 403 login 403 403"),
    "GET /jobs/{job_id}/outputs.zip": ("page_submitter", "login ok 404 403 login 403 403"),
    "GET /credits/": ("page_submitter", "login ok ok 403 login 403 403"),
}

# Lists that some actors may read: who sees the world owner's object in them (everyone else
# who is allowed sees only their own rows).
LIST_SEES_OWNERS_OBJECT = {
    "GET /api/v1/keys/": {"owner"},
    "GET /api/v1/nodes/": {"owner"},
    "GET /api/v1/jobs/": {"owner"},
    "GET /api/v1/cashouts/": {"owner", "finance", "admin"},
    "GET /account/keys/": {"owner"},
    "GET /nodes/": {"owner"},
    "GET /earnings/": {"owner"},
    "GET /finance/cashouts/": {"finance", "admin"},
    "GET /jobs/": {"owner"},
}

# Routes the matrix leaves out, with the reason.
EXCLUDED_PREFIXES = {
    "/admin/": "Django admin: session login of a staff user only; API keys never reach it "
    "(checked by test_the_admin_site_takes_no_api_key)",
    "/api-auth/": "DRF's browsable-API login and logout pages",
}
EXCLUDED_PATHS: dict[str, str] = {
    "/api/v1/{unknown}": "any path the API does not serve: a JSON 404 for everyone "
    "(tests/core/test_api_base.py)",
}


def expected(endpoint: str) -> dict[str, str]:
    _, cells = MATRIX[endpoint]
    values = cells.split()
    assert len(values) == len(ACTORS), endpoint
    return dict(zip(ACTORS, values, strict=True))


def _route(pattern) -> str:
    text = str(pattern)
    if text.startswith("^") or text.endswith("$"):
        text = text.removeprefix("^").removesuffix("$").replace("/?", "")
        return re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", text)
    return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", text)


_METHODS = ("get", "post", "put", "patch", "delete")


def resolver_endpoints() -> set[str]:
    """Every (method, route) the URL configuration serves, as "METHOD /path/{param}"."""
    from django.urls import URLResolver, get_resolver

    found: set[str] = set()

    def walk(patterns, prefix: str) -> None:
        for entry in patterns:
            route = prefix + _route(entry.pattern)
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, route)
                continue
            path = "/" + route
            if path in EXCLUDED_PATHS or any(path.startswith(p) for p in EXCLUDED_PREFIXES):
                continue
            view = getattr(entry.callback, "view_class", None) or getattr(
                entry.callback, "cls", None
            )
            # A plain function view (healthz, metrics) answers GET only; a class view, the
            # methods it defines and allows (Django's form views define a `put` they refuse).
            methods = (
                ["GET"]
                if view is None
                else [
                    m.upper()
                    for m in _METHODS
                    if hasattr(view, m) and m in getattr(view, "http_method_names", _METHODS)
                ]
            )
            found.update(f"{method} {path}" for method in methods)

    walk(get_resolver().url_patterns, "")
    return found


def _shown(cell: str) -> str:
    if cell == "ok":
        return "allowed"
    if cell == "login":
        return "sent to log in (302)"
    return f"denied ({cell})"


def render_markdown() -> str:
    head = ["endpoint", "owner is", *(HEADINGS[a] for a in ACTORS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for endpoint, (owner, _) in MATRIX.items():
        cells = expected(endpoint)
        shown = [_shown(cells[a]) for a in ACTORS]
        lines.append(f"| `{endpoint}` | {OWNERS[owner]} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_markdown())
