# Sourced by scripts/demo.sh after the sample jobs: the tiny model goes into the catalog, the
# demo agent fetches it from the hub and serves it with llama.cpp, and alice asks for a
# streamed chat completion and a whole completion through the OpenAI-compatible relay.
step "Inference: the tiny model in the catalog; the agent serves it with llama.cpp"
"$PY" scripts/demo_setup.py inference "$INFERENCE_MODELS_DIR"
for _ in $(seq 60); do
  listed=$(curl -fsS -H "Authorization: Bearer $SUBMITTER_KEY" "$HUB/v1/models" || true)
  case "$listed" in *'"tiny"'*) break ;; esac
  sleep 0.5
done
echo "GET /v1/models: $listed"

step "alice streams a chat completion (SSE, one chunk per token)"
curl -fsSN "$HUB/v1/chat/completions" -H "Authorization: Bearer $SUBMITTER_KEY" \
  -H "Content-Type: application/json" \
  -d '{"model": "tiny", "messages": [{"role": "user", "content": "Hello, pool!"}],
       "max_tokens": 24, "temperature": 0, "stream": true,
       "stream_options": {"include_usage": true}}' >"$VAR/stream.txt"
grep -m 3 '^data' "$VAR/stream.txt"
echo "  …"
grep '^data' "$VAR/stream.txt" | tail -n 3
"$PY" - "$VAR/stream.txt" <<'PY'
import json, sys
chunks = [json.loads(line[6:]) for line in open(sys.argv[1]) if line.startswith("data: {")]
text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
print(f"{len(chunks)} chunks; the answer: {text!r}")
PY

step "alice asks for a whole completion (one JSON body, with usage)"
curl -fsS "$HUB/v1/completions" -H "Authorization: Bearer $SUBMITTER_KEY" \
  -H "Content-Type: application/json" \
  -d '{"model": "tiny", "prompt": "Pooled GPUs", "max_tokens": 16, "temperature": 0}'
echo
"$PY" scripts/demo_setup.py requests
