"""A tiny random-weight llama model in GGUF (about 440 KB) that llama.cpp really loads and
generates from: for tests, the benchmark and the demo, so that nothing downloads a model.

Its vocabulary is bytes (SentencePiece with byte fallback: `<unk>`, `<s>`, `</s>`, then
`<0x00>`…`<0xFF>`); the output rows are zero except for printable ASCII, so it writes readable
gibberish. Needs the `gguf` and `numpy` packages (requirements/inference.txt).

    python -m inference.tiny_model var/models/tiny.gguf
"""

import sys
from pathlib import Path

N_VOCAB = 259
N_EMBD = 64
N_BLOCKS = 2
N_FF = 128
N_HEAD = 4
N_HEAD_KV = 2
CONTEXT = 2048


def write_tiny_model(path: Path, *, seed: int = 0) -> Path:
    import gguf
    import numpy as np

    rng = np.random.default_rng(seed)
    head_dim = N_EMBD // N_HEAD

    def weights(*shape: int) -> "np.ndarray":
        return (rng.standard_normal(shape) * 0.5).astype(np.float32)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_BLOCKS)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("llama")
    tokens = [b"<unk>", b"<s>", b"</s>"] + [f"<0x{i:02X}>".encode() for i in range(256)]
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * N_VOCAB)
    writer.add_token_types([2, 3, 3] + [6] * 256)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_space_prefix(False)
    output = weights(N_VOCAB, N_EMBD)
    printable = np.zeros(N_VOCAB, dtype=bool)
    printable[3 + 32 : 3 + 127] = True  # the byte tokens of " " … "~"
    output[~printable] = 0.0
    writer.add_tensor("token_embd.weight", weights(N_VOCAB, N_EMBD))
    writer.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    writer.add_tensor("output.weight", output)
    for block in range(N_BLOCKS):
        name = f"blk.{block}"
        writer.add_tensor(f"{name}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(f"{name}.attn_q.weight", weights(N_HEAD * head_dim, N_EMBD))
        writer.add_tensor(f"{name}.attn_k.weight", weights(N_HEAD_KV * head_dim, N_EMBD))
        writer.add_tensor(f"{name}.attn_v.weight", weights(N_HEAD_KV * head_dim, N_EMBD))
        writer.add_tensor(f"{name}.attn_output.weight", weights(N_EMBD, N_HEAD * head_dim))
        writer.add_tensor(f"{name}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(f"{name}.ffn_gate.weight", weights(N_FF, N_EMBD))
        writer.add_tensor(f"{name}.ffn_up.weight", weights(N_FF, N_EMBD))
        writer.add_tensor(f"{name}.ffn_down.weight", weights(N_EMBD, N_FF))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "tiny.gguf")
    target.parent.mkdir(parents=True, exist_ok=True)
    print(write_tiny_model(target))
