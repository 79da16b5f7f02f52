"""The WordPress REST client: Application Password auth, timeouts, retries, clear errors.

Every call goes through `request()`. Routes are addressed as `/?rest_route=/wp/v2/posts`, which
every WordPress answers, with or without pretty permalinks. WordPress's error bodies
(`{"code", "message", "data": {"status"}}`) become `SiteError`s (an `ActionError` that keeps the
HTTP status and WordPress's code) that the model and the person can read: "WordPress answered
404 rest_post_invalid_id: Invalid post ID. (GET /wp/v2/posts/9)".

Retries (exponential backoff with full jitter, the sleep injected): GET, PUT and DELETE are
retried after 5xx, 408, 429, timeouts and network errors. A POST may have taken effect even when
its answer was lost, so it is retried only when WordPress surely did not act (no connection was
made, or it answered 429 or 503), unless the caller marks it idempotent (an update). What is
still retryable after that is the action ledger's to decide (DESIGN.md section 5).
"""

from __future__ import annotations

import html
import mimetypes
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx

from pressloop.backoff import full_jitter
from pressloop.clock import Sleep, real_sleep
from pressloop.config import Settings
from pressloop.errors import ActionError, ConfigurationError, SiteError
from pressloop.observability.tracing import instrument_httpx

Value = str | int | float | bool | None
Params = Mapping[str, Value | list[int] | list[str]]  # lists are sent comma-separated

_NOT_PROCESSED = frozenset({429, 503})  # WordPress did not act: safe to repeat even a POST
# Refusals that WordPress answers with 500 (wp_insert_user's WP_Error carries no status): the
# input is wrong, so repeating the call can never help.
_REFUSED_AS_500 = frozenset({
    "existing_user_login", "existing_user_email", "empty_user_login", "invalid_username",
    "invalid_email", "user_login_too_long", "user_nicename_too_long", "user_url_too_long",
})  # fmt: skip
_CREDENTIALS = "PRESSLOOP_WP_USER and PRESSLOOP_WP_APP_PASSWORD"


@dataclass(kw_only=True, frozen=True)
class WordPressResponse:
    status: int
    data: Any
    headers: httpx.Headers

    @property
    def total(self) -> int | None:
        """`X-WP-Total` of a listing: how many items match, over all pages."""
        value = self.headers.get("x-wp-total")
        return int(value) if value and value.isdigit() else None


class WordPressClient:
    """An async client for one site's REST API, authenticated with an Application Password."""

    def __init__(
        self,
        base_url: str,
        user: str,
        app_password: str,
        *,
        timeout_s: float = 30.0,
        max_retries: int = 2,
        retry_base_s: float = 0.5,
        retry_cap_s: float = 8.0,
        sleep: Sleep = real_sleep,
        rand: Callable[[], float] = random.random,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        # Accept the address people copy: "https://site/", ".../wp-json" or ".../wp-json/".
        self.base_url = re.sub(r"/(wp-json/?)?$", "", base_url.strip())
        self.user = user
        self.timeout_s = timeout_s
        self._max_retries = max(0, max_retries)
        self._base_s = retry_base_s
        self._cap_s = retry_cap_s
        self._sleep = sleep
        self._rand = rand
        self._http = httpx.AsyncClient(
            auth=httpx.BasicAuth(user, app_password),
            timeout=timeout_s,
            transport=transport,
            headers={"Accept": "application/json", "User-Agent": "Pressloop"},
        )
        # A span per request, sending `traceparent` to the site (only when tracing is on).
        instrument_httpx(self._http)

    @classmethod
    def from_settings(cls, settings: Settings, **options: Any) -> WordPressClient:
        """The client for `PRESSLOOP_WP_URL` with the PRESSLOOP_WP_TIMEOUT and _RETRIES
        settings; a `ConfigurationError` names what is missing."""
        named = {
            "PRESSLOOP_WP_URL": settings.wp_url,
            "PRESSLOOP_WP_USER": settings.wp_user,
            "PRESSLOOP_WP_APP_PASSWORD": settings.wp_app_password,
        }
        if missing := [name for name, value in named.items() if not value]:
            raise ConfigurationError(f"WordPress is not configured: set {', '.join(missing)}")
        assert settings.wp_url and settings.wp_user and settings.wp_app_password
        tuning: dict[str, Any] = {
            "timeout_s": settings.wp_timeout_s,
            "max_retries": settings.wp_retries,
            "retry_base_s": settings.wp_retry_base_s,
            "retry_cap_s": settings.wp_retry_cap_s,
        }
        return cls(
            settings.wp_url, settings.wp_user, settings.wp_app_password, **(tuning | options)
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> WordPressClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- the verbs ------------------------------------------------------------------------------

    async def get(self, path: str, params: Params | None = None, *, context: str = "edit") -> Any:
        """GET a route, with `context=edit` unless told otherwise ("" for none): raw fields and
        drafts, and wrong credentials fail with 401 instead of reading as an anonymous visitor
        (WordPress 6.1 quietly ignores a wrong Application Password on public routes)."""
        query = {**(params or {}), **({"context": context} if context else {})}
        return (await self.request("GET", path, params=query)).data

    async def post(
        self,
        path: str,
        json: Any = None,
        *,
        params: Params | None = None,
        idempotent: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """POST a route; `headers` carry e.g. the step's marker on a create (`markers`)."""
        return (
            await self.request(
                "POST", path, json=json, params=params, idempotent=idempotent, headers=headers
            )
        ).data

    async def put(self, path: str, json: Any = None, *, params: Params | None = None) -> Any:
        return (await self.request("PUT", path, json=json, params=params)).data

    async def delete(self, path: str, params: Params | None = None) -> Any:
        return (await self.request("DELETE", path, params=params)).data

    async def whoami(self) -> dict[str, Any]:
        """The user the credentials sign in as (`/wp/v2/users/me` with `context=edit`: its
        username, roles and capabilities). WordPress reads a call with a wrong Application
        Password as an anonymous visitor's, and public routes answer it; this one fails with a
        401 naming the settings instead."""
        me = await self.get("/wp/v2/users/me")
        if not isinstance(me, dict) or "id" not in me:
            raise SiteError(
                f"WordPress at {self.base_url} answered GET /wp/v2/users/me with something "
                "that is not a user: check PRESSLOOP_WP_URL",
                status=200,
                retryable=False,
            )
        return me

    async def upload_media(
        self,
        data: bytes,
        filename: str,
        *,
        content_type: str | None = None,
        fields: Params | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Upload a file from bytes; `fields` (title, alt_text, caption, post...) come along."""
        safe_name = re.sub(r"[^A-Za-z0-9._-]+", "-", filename).strip("-.") or "upload"
        kind = content_type or mimetypes.guess_type(safe_name)[0] or "application/octet-stream"
        sent = {
            **(headers or {}),
            "Content-Type": kind,
            "Content-Disposition": f'attachment; filename="{safe_name}"',
        }
        response = await self.request(
            "POST", "/wp/v2/media", params=fields, content=data, headers=sent
        )
        return response.data

    # -- one request, retried -----------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        json: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        idempotent: bool | None = None,
    ) -> WordPressResponse:
        """Send one REST call (`path` like "/wp/v2/posts/7"), retrying what may be retried."""
        if not path.startswith("/"):
            raise ValueError(f"a REST route starts with '/': {path!r}")
        repeatable = method != "POST" if idempotent is None else idempotent
        writes = method != "GET"  # after a write was sent, a lost answer leaves its effect unknown
        query = {"rest_route": path, **{k: _param(v) for k, v in (params or {}).items()}}
        what = f"{method} {path}"
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    method, self.base_url + "/", params=query, json=json, content=content,
                    headers=headers,
                )  # fmt: skip
            except httpx.TimeoutException as exc:
                error = ActionError(
                    f"WordPress at {self.base_url} did not answer within {self.timeout_s:g} s "
                    f"({what})",
                    retryable=True,
                )
                error.__cause__ = exc
                unsent = isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout)
                error.outcome_unknown = writes and not unsent
                may_retry = repeatable or unsent
            except httpx.TransportError as exc:
                reason = str(exc) or type(exc).__name__
                error = ActionError(
                    f"could not reach WordPress at {self.base_url}: {reason} ({what})",
                    retryable=True,
                )
                error.__cause__ = exc
                error.outcome_unknown = writes and not isinstance(exc, httpx.ConnectError)
                may_retry = repeatable or isinstance(exc, httpx.ConnectError)
            else:
                if response.is_success:
                    data = _decode(response, what, writes)
                    return WordPressResponse(
                        status=response.status_code, data=data, headers=response.headers
                    )
                error = self._status_error(response, what)
                failed_after_write = writes and response.status_code >= 500
                error.outcome_unknown = (
                    failed_after_write
                    and error.retryable
                    and response.status_code not in _NOT_PROCESSED
                )
                may_retry = error.retryable and (
                    repeatable or response.status_code in _NOT_PROCESSED
                )
            if not may_retry or attempt >= self._max_retries:
                if attempt:
                    error.message += f" (gave up after {attempt + 1} attempts)"
                    error.args = (error.message,)
                raise error
            # `attempt` is the 0-based index of the attempt that just failed: retry attempt + 1.
            await self._sleep(
                full_jitter(attempt + 1, base_s=self._base_s, cap_s=self._cap_s, rand=self._rand)
            )
            attempt += 1

    def _status_error(self, response: httpx.Response, what: str) -> SiteError:
        status = response.status_code
        if response.is_redirect:
            return SiteError(
                f"WordPress redirected {what} to {response.headers.get('location', '?')}: set "
                "PRESSLOOP_WP_URL to the site's own address",
                status=status,
                retryable=False,
            )
        try:
            body = response.json()
        except ValueError:
            body = None
        site_code: str | None = None
        if isinstance(body, dict) and isinstance(body.get("code"), str):
            site_code = body["code"]
            detail = f"{site_code}: {_plain(str(body.get('message', '')))}"
            data = body.get("data")
            invalid = data.get("params") if isinstance(data, dict) else None
            if isinstance(invalid, dict):
                detail += "".join(f"; {name}: {_plain(str(v))}" for name, v in invalid.items())
        elif response.content:
            detail = f"with a body that is not a WordPress error: {_preview(response)}"
        else:
            detail = "with an empty body"
        message = f"WordPress answered {status} {detail} ({what})"
        signed_out = status == 401 or _refused_signed_out(body)
        if signed_out:
            message += (
                f". WordPress did not accept the credentials: check {_CREDENTIALS} (an "
                "Application Password from the user's profile, not the login password)"
            )
        elif status == 403:
            message += f". The user {self.user!r} (PRESSLOOP_WP_USER) lacks the permission"
        return SiteError(
            message,
            status=status,
            site_code=site_code,
            retryable=(status >= 500 and site_code not in _REFUSED_AS_500) or status in (408, 429),
            signed_out=signed_out,
        )


def _param(value: Value | list[int] | list[str]) -> str:
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _refused_signed_out(body: Any) -> bool:
    """A refusal whose details say 401: a parameter only a signed-in user may use (a 400
    "status: Status is forbidden."), refused because WordPress read the call as an anonymous
    visitor's, which it does when the Application Password is wrong."""
    data = body.get("data") if isinstance(body, dict) else None
    details = data.get("details") if isinstance(data, dict) else None
    return isinstance(details, dict) and any(
        isinstance(d, dict) and isinstance(d.get("data"), dict) and d["data"].get("status") == 401
        for d in details.values()
    )


def _plain(text: str) -> str:
    """Text without HTML tags, entities or runs of whitespace."""
    return " ".join(html.unescape(re.sub(r"<[^>]*>", " ", text)).split())


def _preview(response: httpx.Response, limit: int = 200) -> str:
    text = _plain(response.content.decode("utf-8", errors="replace"))
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _decode(response: httpx.Response, what: str, writes: bool = False) -> Any:
    """The JSON of a success answer. Unreadable (a PHP notice around it, cut off) after a
    write, it does not say what WordPress did: `outcome_unknown`, so the executor looks."""
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError as exc:
        unreadable = SiteError(
            f"WordPress answered {response.status_code} with a body that is not JSON "
            f"({what}): {_preview(response)}",
            status=response.status_code,
            retryable=False,
        )
        unreadable.outcome_unknown = writes
        raise unreadable from exc
