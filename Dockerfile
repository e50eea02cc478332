# The operator image: `docker build -t modelseal:0.1.0 .` then `kind load docker-image modelseal:0.1.0`
# (or push it and set it with kustomize `images:` in an overlay of deploy/).
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir ".[operator]" && rm -rf /src
USER 65532:65532
ENTRYPOINT ["modelseal"]
CMD ["operator", "run", "--help"]
