"""Published model shapes: one row per model, the ModelSpec fields it sets.

``ModelSpec.preset(name)`` builds a row (``ModelSpec.presets()`` lists them). The sources
of every figure are in the comment above the table.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MODEL_PRESETS"]

# Published shapes. Sources:
#   Llama 2: Touvron et al. 2023, "Llama 2", Table 1 and the released params.json /
#            HF config.json (meta-llama/Llama-2-{7,13,70}b-hf): vocab 32000, context 4096.
#   Llama 3: Llama Team 2024, "The Llama 3 Herd of Models", Table 3 (layers, model dim,
#            FFN dim, heads, KV heads, vocab 128 000 -> 128256 in config.json), context 8192.
#   GPT-3:   Brown et al. 2020, Table 2.1 (175B: 96 layers, d_model 12288, 96 heads,
#            context 2048), GPT-2 BPE vocab 50257, tied input/output embeddings.
#   Mixtral: Jiang et al. 2024, "Mixtral of Experts", Table 1 (8 experts, top-2) and the
#            released config.json (mistralai/Mixtral-8x7B-v0.1): 46.7B total, 12.9B active
#            (model card); exact 46,702,792,704 as transformers counts the checkpoint.
#   DeepSeek-V3: DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", and the released
#            config.json (deepseek-ai/DeepSeek-V3): 61 layers, the first 3 dense
#            (first_k_dense_replace), h 7168, dense FFN 18432, 256 routed experts of 2048
#            plus 1 shared, top-8, 128 heads with MLA (q_lora_rank 1536, kv_lora_rank 512,
#            qk_nope 128, qk_rope 64, v_head 128), vocab 129280, untied, context 4096 in
#            pre-training. "671B total parameters, 37B activated per token"; the HF files
#            hold 685B = 671B main model + 14B multi-token-prediction module, which is not
#            part of this preset. The router's e_score_correction_bias (256 per MoE layer,
#            14,848 in all) is not counted.
#   Qwen3-MoE: Qwen team 2025, "Qwen3 Technical Report", Table 2, and the released
#            config.json files (Qwen/Qwen3-30B-A3B, Qwen/Qwen3-235B-A22B): 128 experts,
#            top-8, no shared expert, GQA with 4 KV heads, head_dim 128, q/k RMSNorm,
#            vocab 151936, untied. Model cards: 30.5B total / 3.3B activated (29.9B
#            non-embedding) and 235B total / 22B activated (234B non-embedding).
MODEL_PRESETS: dict[str, dict[str, Any]] = {
    "llama2-7b": dict(num_layers=32, hidden_size=4096, num_attention_heads=32,
                      ffn_hidden_size=11008, vocab_size=32000, seq_length=4096, mlp="gated"),
    "llama2-13b": dict(num_layers=40, hidden_size=5120, num_attention_heads=40,
                       ffn_hidden_size=13824, vocab_size=32000, seq_length=4096, mlp="gated"),
    "llama2-70b": dict(num_layers=80, hidden_size=8192, num_attention_heads=64,
                       num_kv_heads=8, ffn_hidden_size=28672, vocab_size=32000,
                       seq_length=4096, mlp="gated"),
    "llama3-8b": dict(num_layers=32, hidden_size=4096, num_attention_heads=32,
                      num_kv_heads=8, ffn_hidden_size=14336, vocab_size=128256,
                      seq_length=8192, mlp="gated"),
    "llama3-70b": dict(num_layers=80, hidden_size=8192, num_attention_heads=64,
                       num_kv_heads=8, ffn_hidden_size=28672, vocab_size=128256,
                       seq_length=8192, mlp="gated"),
    "llama3-405b": dict(num_layers=126, hidden_size=16384, num_attention_heads=128,
                        num_kv_heads=8, ffn_hidden_size=53248, vocab_size=128256,
                        seq_length=8192, mlp="gated"),
    "gpt3-175b": dict(num_layers=96, hidden_size=12288, num_attention_heads=96,
                      vocab_size=50257, seq_length=2048, mlp="gpt", tied_embeddings=True),
    "mixtral-8x7b": dict(num_layers=32, hidden_size=4096, num_attention_heads=32,
                         num_kv_heads=8, ffn_hidden_size=14336, vocab_size=32000,
                         seq_length=4096, mlp="gated", num_experts=8, moe_top_k=2),
    "deepseek-v3": dict(num_layers=61, hidden_size=7168, num_attention_heads=128,
                        head_dim=128, q_lora_rank=1536, kv_lora_rank=512,
                        qk_rope_head_dim=64, v_head_dim=128, ffn_hidden_size=18432,
                        vocab_size=129280, seq_length=4096, mlp="gated", num_experts=256,
                        moe_top_k=8, moe_ffn_hidden_size=2048, num_shared_experts=1,
                        first_dense_layers=3),
    "qwen3-30b-a3b": dict(num_layers=48, hidden_size=2048, num_attention_heads=32,
                          num_kv_heads=4, head_dim=128, qk_norm=True, ffn_hidden_size=6144,
                          vocab_size=151936, seq_length=4096, mlp="gated", num_experts=128,
                          moe_top_k=8, moe_ffn_hidden_size=768),
    "qwen3-235b-a22b": dict(num_layers=94, hidden_size=4096, num_attention_heads=64,
                            num_kv_heads=4, head_dim=128, qk_norm=True, ffn_hidden_size=12288,
                            vocab_size=151936, seq_length=4096, mlp="gated", num_experts=128,
                            moe_top_k=8, moe_ffn_hidden_size=1536),
}
