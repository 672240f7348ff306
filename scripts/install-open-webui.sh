#!/usr/bin/env bash
# Open WebUI at a pinned version for test/e2e/open-webui.test.ts, in a venv under .cache/open-webui/<version>/ (or
# $OPEN_WEBUI_HOME). Idempotent: a finished install is kept and reused (a stamp file marks it finished).
# The lightest install that serves chat: `pip install open-webui` pulls torch, transformers, chromadb, onnxruntime,
# opencv, pandas and more (several GB) for local embeddings, speech and document parsing, none of which a chat needs,
# and torch's CPU wheels are not on PyPI. So open-webui goes in with --no-deps, plus only the packages its server
# imports when it starts in its own slim mode (USE_SLIM_DOCKER=true, the mode of its slim image), at the versions
# open-webui pins (the rest resolved once and frozen below). The test starts it with that mode and checks it starts,
# lists models and streams a chat. Python: open-webui requires >=3.11,<3.13 (override with OPEN_WEBUI_PYTHON).
set -euo pipefail
VERSION=0.12.4
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${OPEN_WEBUI_HOME:-$root/.cache/open-webui/$VERSION}"
if [ -f "$dir/installed" ] && [ -x "$dir/venv/bin/open-webui" ]; then
  echo "open-webui $VERSION: cached in $dir"
  exit 0
fi
python="${OPEN_WEBUI_PYTHON:-}"
if [ -z "$python" ]; then
  for candidate in python3.11 python3.12 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] < (3, 13)))'; then
      python="$candidate"; break
    fi
  done
fi
if [ -z "$python" ]; then
  echo "install-open-webui: open-webui $VERSION needs Python >=3.11,<3.13; none found (set OPEN_WEBUI_PYTHON)" >&2
  exit 1
fi
# Debian's Python makes venvs only with python3-venv (its ensurepip)
if ! "$python" -c 'import ensurepip' >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
# open-webui's own pins for what its slim server imports, and the packages those need, frozen (pip freeze)
requirements=$(cat <<'REQS'
aiocache==0.12.3 aiofiles==25.1.0 aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 aiosqlite==0.22.1
alembic==1.18.4 annotated-doc==0.0.7 annotated-types==0.8.0 anyio==4.16.0 asgiref==3.11.1 attrs==26.1.0
Authlib==1.7.2 bcrypt==5.0.0 beautifulsoup4==4.14.3 bidict==0.24.1 black==26.5.1 boto3==1.42.62
botocore==1.42.97 brotli==1.2.1 certifi==2026.10.19.post1 cffi==2.1.1 charset-normalizer==3.5.3 click==8.5.1
cryptography==48.0.1 distro==1.9.0 fastapi==0.136.3 frozenlist==1.8.0 google-re2==1.1.20251105 greenlet==3.5.6
h11==0.16.0 httpcore==1.0.9 httpcore2==2.16.0 httptools==0.9.0 httpx==0.28.1 httpx2==2.16.0 idna==3.20
itsdangerous==2.2.0 jmespath==1.1.0 joserfc==1.7.4 jsonpatch==1.48 jsonpointer==3.12 jsonschema==4.26.0
jsonschema-specifications==2025.9.1 langchain-classic==1.0.7 langchain-core==1.4.8 langchain-protocol==0.0.20
langchain-text-splitters==1.1.2 langsmith==0.15.1 ldap3==2.9.1 loguru==0.7.3 Mako==1.4.3 Markdown==3.10.2
markdown-it-py==4.3.0 MarkupSafe==3.0.4 mcp==2.3.0 mcp-types==2.3.0 mdurl==0.1.2 multidict==7.2.1
mypy_extensions==1.2.0 numpy==2.4.6 opentelemetry-api==1.45.3 orjson==3.11.9 packaging==26.4 pathspec==1.1.1
pillow==13.0.0 platformdirs==4.14.9 propcache==0.5.4 pyasn1==0.6.5 pycparser==3.12 pycrdt==0.14.8
pydantic==2.13.4 pydantic_core==2.46.4 pydub==0.25.1 Pygments==2.21.0 PyJWT==2.13.0 pyotp==2.9.0
python-dateutil==2.9.0.post0 python-dotenv==1.2.4 python-engineio==4.15.1 python-mimeparse==2.0.0
python-multipart==0.0.32 python-socketio==5.16.2 pytokens==0.4.1 pytz==2026.2 PyYAML==6.0.4 qrcode==8.2
redis==8.0.1 referencing==0.37.0 regex==2026.5.9 requests==2.34.2 requests-toolbelt==1.0.0 rich==15.0.0
rpds-py==2026.9.1 s3transfer==0.16.1 shellingham==1.5.4 simple-websocket==1.1.0 six==1.17.0 sniffio==1.3.1
soupsieve==4.1.4 SQLAlchemy==2.0.50 sse-starlette==3.7.1 starlette==1.10.0 starlette-compress==1.7.1
starsessions==2.2.1 tenacity==9.2.1 tiktoken==0.13.0 truststore==0.10.5 typer==0.29.2 typing-inspection==0.4.5
typing_extensions==4.16.0 urllib3==2.8.0 uuid_utils==0.19.0 uvicorn==0.54.0 uvloop==0.23.0 validators==0.35.0
watchfiles==1.3.0 websockets==17.4 wsproto==1.3.2 xxhash==4.1.0 yarl==1.25.1 zstandard==0.25.0
REQS
)
start=$(date +%s)
rm -rf "$dir"
mkdir -p "$dir"
"$python" -m venv "$dir/venv"
# shellcheck disable=SC2086 # one requirement a word
"$dir/venv/bin/pip" install --quiet --no-deps "open-webui==$VERSION" $requirements
touch "$dir/installed"
echo "open-webui $VERSION: installed in $dir ($(du -sh "$dir" | cut -f1), $(( $(date +%s) - start )) s)"
