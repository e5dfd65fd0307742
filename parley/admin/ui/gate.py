"""How a dashboard request goes through ``site.gate``: the session (or the login page)
and the CSRF check first, and every failure shown as a page, not the JSON envelope (a
database that is down too: a 503 page, where the admin API answers the envelope; a
form's address opened with GET, a 405 page; a fault in a page, a 500 page, the
traceback only in the log).

Imported by the first dashboard request (with the pages and Jinja2), never by a gateway
whose dashboard nobody opens.
"""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.typedefs import Handler

from parley.admin.signin import require_role
from parley.admin.tenancy import admit
from parley.admin.ui import session
from parley.admin.ui.render import page
from parley.admin.ui.voices import VOICES
from parley.errors import ParleyError
from parley.store.base import StoreFault, StoreUnavailable

DATABASE_DOWN = (
    "The database is unavailable right now, so this page cannot be shown. Try again shortly."
)
PAGE_FAILED = (
    "This page could not be shown because of a fault in Parley; the details are in the"
    " server's log."
)
NO_SUCH_PAGE = "There is no such page in the dashboard."
log = logging.getLogger("parley.admin")


async def serve_page(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A dashboard page: the session entered, then the page, any failure as a page."""
    try:
        await session.enter(request)
        await admit(request)
        require_role(request)
        return await handler(request)
    except ParleyError as error:
        return _error_page(request, error.message, error.status)
    except web.HTTPNotFound:
        return _error_page(request, NO_SUCH_PAGE, 404)
    except web.HTTPMethodNotAllowed as refused:  # a form's address opened as a page
        response = _error_page(request, NO_SUCH_PAGE, 405)
        response.headers["Allow"] = ",".join(sorted(refused.allowed_methods))
        return response
    except StoreUnavailable as error:
        log.warning("%s %s: %s", request.method, request.path, error)
        response = _error_page(request, DATABASE_DOWN, 503)
        response.headers["Retry-After"] = "1"
        return response
    except StoreFault as fault:  # the query's fault, said in one line: no SQL, no traceback
        log.error("%s %s: %s", request.method, request.path, fault)
        return _error_page(request, PAGE_FAILED, 500)
    except web.HTTPException:  # redirects after a form, and aiohttp's own answers
        raise
    except Exception:  # a bug: said on a page, its traceback only in the log
        log.exception("unhandled error on dashboard page %s %s", request.method, request.path)
        return _error_page(request, PAGE_FAILED, 500)


def _error_page(request: web.Request, message: str, status: int) -> web.Response:
    context = {"message": message, "back": _back(request), "status": status}
    return page(request, "error.html", context, status=status)


def _back(request: web.Request) -> str:
    """The page to return to from a failed form or a missing page."""
    if request.path.startswith(VOICES):
        return VOICES
    if request.method == "POST":
        parent, _, last = request.path.rpartition("/")
        if last in ("disable", "enable", "keys", "revoke"):
            return parent if "/keys/" not in request.path else "/admin/ui/groups"
        return request.path
    return "/admin/ui/groups" if request.path.startswith("/admin/ui/groups/") else "/admin/"
