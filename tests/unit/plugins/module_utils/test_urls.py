"""_urls.parse_url against published SSRF-bypass and parser-differential URLs: each is refused,
or accepted with urllib.parse, httpx and urllib3 reading the same scheme, host, port and path.

Sources: Orange Tsai, "A New Era of SSRF - Exploiting URL Parser in Trending Programming
Languages" (Black Hat USA 2017) and PayloadsAllTheThings, "Server Side Request Forgery" (URL
bypasses: localhost forms, IP encodings, @ and # confusion, unicode, CRLF); issue 37 item 3.
"""

import urllib.parse

import httpx
import pytest
import urllib3.util

from ansible_collections.bridge.hpc.plugins.module_utils._errors import BackendURLNotAllowed, SpecError
from ansible_collections.bridge.hpc.plugins.module_utils._urls import (
    ALLOWED_URLS_ENV,
    AllowList,
    UrlPrefix,
    parse_url,
    require_sendable,
)

ACCEPTED = [
    "http://127.0.0.1:6820",
    "http://127.0.0.1:6820/",
    "https://slurm.example.org/slurm/v0.0.40/jobs",
    "https://SLURM.Example.org:8443/api",
    "http://[::1]:8265/api/jobs/",
    "http://[2001:db8::1]/",
    "https://10.96.0.1:443",
    "http://0.0.0.0:80/x",
    "http://slurm_rest:6820/",
    "http://123.example.org/",
    "http://0x7f.example/",
    "https://a-b.c-d.example/~user/p;a=1/x,y/%41",
    "http://host:65535/a%20b",
]

# Each refused, whatever the allow-list; grouped by the trick.
REFUSED = [
    # Orange Tsai: the backslash that urllib3 (and WHATWG) end the authority at, the @ confusions.
    "http://127.0.0.1:1\\@127.0.0.1:2/ok",
    "http://1.1.1.1 &@2.2.2.2# @3.3.3.3/",
    "http://127.0.0.1:11211:80/",
    "http://google.com#@evil.com/",
    "http://foo@evil.com:80@google.com/",
    "http://foo@evil.com%20@google.com/",
    "http://evil.com\\google.com/",
    "http://evil.com\\@google.com/",
    "http://allowed.example@evil.example/",
    "http://user:pass@allowed.example/",
    "http://@allowed.example/",
    "http://allowed.example%40evil.example/",
    "http://allowed.example%2f@evil.example/",
    # # and ? tricks
    "http://allowed.example#@evil.example/",
    "http://allowed.example?@evil.example/",
    "http://evil.example/#allowed.example",
    "http://evil.example?x=1",
    # whitespace, tabs, newlines, CRLF injection, NUL
    "http://allowed.example /",
    "http://allowed.\texample/",
    "http://allowed.example/\r\nX-Injected: 1",
    "http://allowed.example/%0d%0aHost:evil",
    "http://allowed.example/\x00",
    " http://allowed.example/",
    "http://allowed.example/\n",
    # localhost encodings
    "http://2130706433/",
    "http://017700000001/",
    "http://0x7f000001/",
    "http://0x7f.0x0.0x0.0x1/",
    "http://0x7f.1/",
    "http://0177.0.0.1/",
    "http://0177.0000.0000.0001/",
    "http://127.1/",
    "http://127.0.1/",
    "http://0/",
    "http://127.000.000.1/",
    "http://256.0.0.1/",
    "http://127.0.0.1./",
    "http://localhost./",
    "http://allowed..example/",
    "http://.allowed.example/",
    "http://-allowed.example/",
    "http://%31%32%37.0.0.1/",
    "http://127.0.0.1%2f/",
    # IPv6 forms
    "http://[::ffff:127.0.0.1]/",
    "http://[0:0:0:0:0:ffff:127.0.0.1]/",
    "http://[::1%25eth0]/",
    "http://[fe80::1%en0]/",
    "http://[0000::1]/",
    "http://[::]:80@evil/",
    "http://[v1.fe80::a+en1]/",
    "http://[::1/",
    "http://::1/",
    # unicode dots, fullwidth digits, enclosed alphanumerics, IDN homographs
    "http://127\u30020\u30020\u30021/",
    "http://127\uff0e0\uff0e0\uff0e1/",
    "http://\uff11\uff12\uff17.0.0.1/",
    "http://\u24db\u24de\u24d2\u24d0\u24db\u24d7\u24de\u24e2\u24e3/",
    "http://allowed.exampl\u0435/",
    "http://xn--allowed.example\u200b/",
    # encoded dots and slashes in the path, dot segments
    "http://allowed.example/api/../admin",
    "http://allowed.example/api/%2e%2e/admin",
    "http://allowed.example/api/%2E./admin",
    "http://allowed.example/api/./x",
    "http://allowed.example/api%2f..%2fadmin",
    "http://allowed.example/api%5c..%5cadmin",
    "http://allowed.example/%00",
    "http://allowed.example/%zz",
    "http://allowed.example/%4",
    # schemes and forms
    "HTTP://allowed.example/",
    "file:///etc/passwd",
    "gopher://127.0.0.1:6379/_INFO",
    "dict://127.0.0.1:11211/",
    "ssh://allowed.example/",
    "http:/allowed.example/",
    "http:\\\\allowed.example/",
    "//allowed.example/",
    "http:///allowed.example/",
    "http://",
    "http://:80/",
    "",
    # ports
    "http://allowed.example:/",
    "http://allowed.example:0/",
    "http://allowed.example:65536/",
    "http://allowed.example:080/",
    "http://allowed.example:+80/",
    "http://allowed.example:8o/",
    "http://allowed.example:80:81/",
    # characters RFC 3986 leaves out
    "http://allowed.example/<script>",
    "http://allowed.example/\"",
    "http://allowed.example/^",
    "http://allowed.example/`",
    "http://allowed.example/{x}",
    "http://allowed.example/|",
    "http://allowed.example/\u00e9",
]


def read_by_each(text):
    """(scheme, host, port, path) as urllib.parse, httpx and urllib3 read `text`."""
    defaults = {"http": 80, "https": 443}
    split = urllib.parse.urlsplit(text)
    split_host = "[%s]" % split.hostname if ":" in split.hostname else split.hostname
    by_urllib = (split.scheme, split_host, split.port or defaults[split.scheme], split.path)
    url = httpx.URL(text)
    httpx_host = "[%s]" % url.host if ":" in url.host else url.host
    by_httpx = (url.scheme, httpx_host, url.port or defaults[url.scheme], url.raw_path.decode("ascii").split("?")[0])
    parsed = urllib3.util.parse_url(text)
    by_urllib3 = (parsed.scheme, parsed.host, parsed.port or defaults[parsed.scheme], parsed.path or "")
    return by_urllib, by_httpx, by_urllib3


@pytest.mark.parametrize("text", ACCEPTED)
def test_what_is_accepted_every_library_reads_alike(text):
    url = parse_url(text)
    ours = (url.scheme, url.host, url.port, url.path)
    by_urllib, by_httpx, by_urllib3 = read_by_each(text)
    # An empty path is "/" to httpx alone: each sends "GET /".
    assert ours == by_urllib == by_urllib3 == (by_httpx if url.path else by_httpx[:3] + ("",))


@pytest.mark.parametrize("text", REFUSED)
def test_bypasses_are_refused_naming_the_field(text):
    with pytest.raises(SpecError) as caught:
        parse_url(text, "spec.backend.url")
    assert caught.value.field == "spec.backend.url"
    if "?" not in text:  # a request's URL may have a query
        with pytest.raises(BackendURLNotAllowed):
            require_sendable(text, AllowList(()), "Slurm")


def test_the_issue_37_backslash_url_is_refused_where_urllib3_would_connect_elsewhere():
    text = "http://127.0.0.1:9\\@127.0.0.1:8/ok"
    # The differential itself: two ports for one text.
    assert urllib.parse.urlsplit(text).port == 8 and urllib3.util.parse_url(text).port == 9
    with pytest.raises(SpecError, match="backslash"):
        parse_url(text)


def test_a_refusal_says_what_is_allowed():
    with pytest.raises(SpecError, match="dotted-quad"):
        parse_url("http://0x7f.1/")
    with pytest.raises(SpecError, match="userinfo"):
        parse_url("http://a@b/")
    with pytest.raises(SpecError, match="1 to 65535"):
        parse_url("http://b:0/")


def test_a_query_only_where_asked():
    assert parse_url("http://h/x?a=1&b=%20", query=True).query == "a=1&b=%20"
    with pytest.raises(SpecError, match="query"):
        parse_url("http://h/x?a=1")


def test_prefix_matches_by_scheme_host_port_and_path():
    prefix = UrlPrefix("https://ok.example/ray")
    assert prefix.matches(parse_url("https://OK.example:443/ray/api"))
    assert prefix.matches(parse_url("https://ok.example/ray"))
    assert not prefix.matches(parse_url("https://ok.example/rayx"))
    assert not prefix.matches(parse_url("http://ok.example/ray"))
    assert not prefix.matches(parse_url("https://ok.example:8443/ray"))


@pytest.mark.parametrize("text", ["http://a@b/", "ftp://x/", "http://x/?q=1", "http://127.1/", "http://x\\y/"])
def test_a_bad_prefix_is_refused(text):
    with pytest.raises(ValueError):
        UrlPrefix(text)


def test_allow_list_through_the_environment():
    allow = AllowList.from_environ({ALLOWED_URLS_ENV: "http://127.0.0.1:1 https://ok.example/ray"})
    assert AllowList.from_environ(allow.environment()).environment() == allow.environment()
    assert allow.refusal("u", "http://127.0.0.1:1/x?y=1", query=True) is None
    assert "not among" in allow.refusal("u", "http://127.0.0.1:2/x")
    assert "backslash" in allow.refusal("u", "http://127.0.0.1:2\\@127.0.0.1:1/")
    with pytest.raises(BackendURLNotAllowed, match="not among"):
        require_sendable("https://ok.example/admin", allow, "Ray")
    assert AllowList.from_environ({}).refusal("u", "http://anything.example/") is None
