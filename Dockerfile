# syntax=docker/dockerfile:1
# contextlift: the proxy, with the embedded SmolLM2 model so the image runs on its own.
# Build: docker build -t contextlift .   Run: docker run -p 8080:8080 contextlift
# Point it at your own model server with -e CONTEXTLIFT_UPSTREAM_URL=http://vllm:8000/v1.

FROM python:3.11-slim-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential=12.9 cmake=3.25.* \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
RUN python -m venv /opt/contextlift
ENV PATH=/opt/contextlift/bin:$PATH
# CPU torch from PyTorch's own index: PyPI's default wheel is the multi-GB CUDA build.
RUN pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md ./
COPY proxy ./proxy
COPY strategies ./strategies
COPY eval ./eval
RUN pip install --no-cache-dir ".[local-model]"

FROM python:3.11-slim-bookworm AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgomp1=12.2.* curl=7.88.* \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 contextlift
COPY --from=build /opt/contextlift /opt/contextlift
ENV PATH=/opt/contextlift/bin:$PATH \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    PYTHONUNBUFFERED=1 \
    CONTEXTLIFT_HOST=0.0.0.0 \
    CONTEXTLIFT_PORT=8080 \
    CONTEXTLIFT_LOG_FORMAT=json
USER contextlift
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=120s CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["contextlift"]
CMD ["serve"]
