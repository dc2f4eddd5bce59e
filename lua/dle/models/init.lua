--- dle.models: pretrained language models.
--   dle.models.gpt2   GPT-2: GPT2(config), from_pretrained(dir), from_llmc(path)
--   dle.models.llama  Llama architecture (Qwen2, Mistral, SmolLM): Llama(config), from_pretrained(dir)
--   dle.models.from_gguf(path)  either architecture from a GGUF file (dle.models.gguf); models
--                               write one with model:save_gguf(path)
-- model(ids) gives logits {B, T, vocab} for int64 token values; model:generate(ids, opts) decodes
-- with a KV cache (dle.models.generation).
local check = require("dle.check")

local models = {
  gpt2 = require("dle.models.gpt2"),
  llama = require("dle.models.llama"),
}

--- A GPT-2 or Llama model from a GGUF v3 file (llama.cpp's names; quantized weights kept quantized).
-- @param path string
-- @return model (in eval mode)
function models.from_gguf(path) return require("dle.models.gguf").from_gguf(path) end

check.export(models.gpt2)
check.export(models.llama)
check.export(models)

return models
