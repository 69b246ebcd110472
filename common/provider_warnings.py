"""Provider settings the runtime accepts but cannot serve with (docs/contract.md section 13).

The runtime talks to its provider through the OpenAI SDK with `provider.baseURL`
as the API root: it posts `<baseURL>/responses`, and its readiness check gets
`<baseURL>/models`. Ollama serves that API under `/v1`. Unset, the base URL is
OpenAI's own API, or for Ollama `http://127.0.0.1:11434/v1`: the runtime's own
Pod. An OpenAI runtime without an API key builds no client at all.

Each case is a valid spec the runtime starts with and then serves no chat
(or calls the wrong URL), so it is a warning, never a denial: the webhook and
the offline validator show it, and the controller puts it in the
`ConfigurationWarnings` condition of a runtime already stored. No message
repeats the URL, which may hold credentials (a stored runtime's may).
"""

from urllib.parse import urlsplit

from trussium_operator.common.api import BASE_URL_IS_HTTP, TrussiumRuntimeSpec
from trussium_operator.common.constants import OLLAMA_API_PATH, RUNTIME_OLLAMA_BASE_URL
from trussium_operator.common.k8s_validation import FieldError

BASE_URL = "spec.provider.baseURL"
CREDENTIALS = "spec.provider.credentialsSecretRef"
_CALLS = "the runtime calls <baseURL>/responses and <baseURL>/models"


def _path(url: str) -> str:
    """The URL's path as the runtime uses it: trailing slashes dropped."""
    return urlsplit(url).path.rstrip("/")


def provider_warnings(spec: TrussiumRuntimeSpec) -> tuple[FieldError, ...]:
    """Each provider setting that leaves the runtime unable to serve, with why."""
    provider = spec.provider
    url = provider.base_url
    warnings: list[FieldError] = []
    if provider.type == "ollama" and url is None:
        warnings.append(
            FieldError(
                BASE_URL,
                f"unset, so the runtime calls {RUNTIME_OLLAMA_BASE_URL}, inside its own Pod, "
                "where no Ollama runs; set the Ollama server's URL, e.g. "
                f"http://ollama.models:11434{OLLAMA_API_PATH}",
            )
        )
    # A URL the schema's rule refuses is reported there (on a stored runtime, tolerated).
    elif url is not None and BASE_URL_IS_HTTP.holds(url):
        path = _path(url)
        if provider.type == "ollama" and not path.endswith(OLLAMA_API_PATH):
            warnings.append(
                FieldError(
                    BASE_URL,
                    f"{_CALLS}, and Ollama serves them under {OLLAMA_API_PATH}: end the URL "
                    f"in {OLLAMA_API_PATH}, e.g. http://ollama.models:11434{OLLAMA_API_PATH}",
                )
            )
        elif provider.type == "openai" and not path:
            warnings.append(
                FieldError(
                    BASE_URL,
                    f"has no path, but {_CALLS}, and OpenAI-compatible servers serve them "
                    "under a path such as /v1 (OpenAI's own: https://api.openai.com/v1)",
                )
            )
    if provider.type == "openai" and provider.credentials_secret_ref is None:
        warnings.append(
            FieldError(
                CREDENTIALS,
                "unset, so the runtime has no API key and serves no chat: it builds no OpenAI "
                "client without one. Reference the key's Secret (a server that needs no key "
                "takes any value)",
            )
        )
    return tuple(warnings)
