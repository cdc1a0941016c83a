# One image for every memstream service; docker-compose.yml picks the process with `command`
# (memstream-sequencer, memstream-archiver, memstream-api, memstream ...).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv

RUN pip install --no-cache-dir uv

WORKDIR /app

# Third-party dependencies first, from the lock file only: this layer survives source edits.
COPY pyproject.toml uv.lock ./
RUN uv sync --frozen --no-dev --no-install-workspace --no-cache

# Then the workspace members (libs/*, services/*, tools/*).
COPY libs ./libs
COPY services ./services
COPY tools ./tools
RUN uv sync --frozen --no-dev --no-cache

ENV PATH="/app/.venv/bin:${PATH}" \
    MEMSTREAM_DATA_DIR=/data \
    MEMSTREAM_API_HOST=0.0.0.0

RUN useradd --system --uid 10001 --user-group --home-dir /data --no-create-home memstream \
    && mkdir -p /data \
    && chown memstream:memstream /data
USER memstream

EXPOSE 8080
CMD ["memstream-api"]
