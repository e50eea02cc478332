# The operator image, also the image of its publication Jobs and of CI steps (examples/ci/):
# `docker build -t modelseal:0.1.0 .` then `kind load docker-image modelseal:0.1.0`
# (or push it and set it with kustomize `images:` in an overlay of deploy/).
# The base is pinned to a Python release; pin its digest too where you build
# (python:3.11.14-slim-bookworm@sha256:...). It is Debian: /bin/sh, bash and coreutils are
# there for a CI's shell steps; modelseal itself needs no shell.
FROM python:3.11.14-slim-bookworm
COPY pyproject.toml README.md /tmp/modelseal/
COPY src /tmp/modelseal/src
RUN pip install --no-cache-dir "/tmp/modelseal[operator]" && rm -rf /tmp/modelseal
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["modelseal"]
CMD ["operator", "run", "--help"]
