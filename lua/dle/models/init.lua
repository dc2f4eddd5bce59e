--- dle.models: pretrained language models.
--   dle.models.gpt2   GPT-2: GPT2(config), from_pretrained(dir), from_llmc(path)
--   dle.models.llama  Llama architecture (Qwen2, Mistral, SmolLM): Llama(config), from_pretrained(dir)
-- model(ids) gives logits {B, T, vocab} for int64 token values; model:generate(ids, opts) decodes
-- with a KV cache (dle.models.generation).
local check = require "dle.check"

local models = {
  gpt2 = require "dle.models.gpt2",
  llama = require "dle.models.llama",
}

check.export(models.gpt2)
check.export(models.llama)

return models
