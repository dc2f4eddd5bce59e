--- examples/llm/generate.lua — text generation from a checkpoint directory:
--   dle examples/llm/generate.lua CHECKPOINT_DIR "prompt" [options]
-- CHECKPOINT_DIR holds config.json, model.safetensors (or a sharded index) and tokenizer.json (or
-- vocab.json + merges.txt); model_type "gpt2" is GPT-2, anything else the Llama architecture (llama,
-- mistral, qwen2, smollm). An llm.c checkpoint (a .bin file) or a GGUF file (.gguf, llama or gpt2)
-- needs --tokenizer DIR.
-- Options: --max-new N (default 50), --temperature T (default 0.8; 0 is greedy), --top-k K, --top-p P,
--   --seed S (default 1), --threads N, --tokenizer DIR, --quantize q8_0|q4_0|q4_k (the Linear layers'
--   weights, dle.nn.utils.quantize_).
-- Prints the text, then the prompt and generated token counts, tokens/s of the decoding, the
-- KV-cache bytes per token, the weights' bytes and the process's peak resident memory.
local dle = require("dle")

local cli = require("argparse")("generate.lua", "Text generation from a checkpoint directory.")
cli:argument("checkpoint", "checkpoint directory (or an llm.c .bin file, or a .gguf file)")
cli:argument("prompt", "the prompt")
cli:option("--max-new", "tokens to generate", 50, math.tointeger)
cli:option("--temperature", "sampling temperature (0: greedy)", 0.8, tonumber)
cli:option("--top-k", "keep the k most likely tokens", nil, math.tointeger)
cli:option("--top-p", "nucleus sampling mass", nil, tonumber)
cli:option("--seed", "sampling seed", 1, math.tointeger)
cli:option("--threads", "CPU threads", nil, math.tointeger)
cli:option("--tokenizer", "tokenizer directory (for an llm.c or GGUF checkpoint)")
cli:option("--quantize", "quantize the Linear weights: q8_0, q4_0 or q4_k")
local a = cli:parse(arg)
local path, prompt = a.checkpoint, a.prompt
local o = {["max-new"] = a.max_new, temperature = a.temperature, ["top-k"] = a.top_k, ["top-p"] = a.top_p,
           seed = a.seed, threads = a.threads, tokenizer = a.tokenizer, quantize = a.quantize}
if o.threads then dle.set_num_threads(o.threads) end

-- Peak resident memory of this process (VmHWM), in bytes.
local function peak_rss()
  local f = io.open("/proc/self/status")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  local kb = s:match("VmHWM:%s*(%d+) kB")
  return kb and tonumber(kb) * 1024
end

local t0 = dle.time()
local model, tok
if path:match("%.bin$") or path:match("%.gguf$") then
  if not o.tokenizer then cli:error("an llm.c or GGUF checkpoint needs --tokenizer DIR") end
  model = path:match("%.gguf$") and dle.models.from_gguf(path) or dle.models.gpt2.from_llmc(path)
else
  local f = io.open(path .. "/config.json")
  if not f then cli:error("no config.json in " .. path) end
  local config = dle.io.json_decode(f:read("a"))
  f:close()
  local family = config.model_type == "gpt2" and dle.models.gpt2 or dle.models.llama
  model = family.from_pretrained(path)
end
if o.quantize then dle.nn.utils.quantize_(model, o.quantize) end
tok = dle.tokenizer.load(o.tokenizer or path)
local load_seconds = dle.time() - t0

local ids = tok:encode(prompt)
if ids:numel() == 0 then cli:error("the prompt encodes to no tokens") end
local out, stats = model:generate(ids, {
  max_new_tokens = math.tointeger(o["max-new"]), temperature = o.temperature,
  top_k = o["top-k"] and math.tointeger(o["top-k"]), top_p = o["top-p"],
  generator = dle.Generator(math.tointeger(o.seed)),
})
print(tok:decode(out[1]))
print("----")
-- the bytes of the float parameters and of the quantized weights (no longer parameters)
local weights = 0
for _, p in ipairs(model:parameters()) do weights = weights + p:numel() * 4 end
for _, m in ipairs(model:modules()) do
  local w = rawget(m, "weight")
  if dle.is_quantized(w) then weights = weights + w:nbytes() end
end
print(string.format("load %.2f s; prompt %d tokens, prefill %.3f s; %d new tokens in %.3f s: %.1f tokens/s",
  load_seconds, ids:numel(), stats.prefill_seconds, stats.new_tokens, stats.decode_seconds,
  stats.new_tokens / math.max(stats.decode_seconds, 1e-9)))
local rss = peak_rss()
print(string.format("KV cache %d bytes per token; weights %.1f MB (%s); peak resident memory %s",
  stats.kv_cache_bytes_per_token, weights / 1e6, o.quantize or "float32",
  rss and string.format("%.1f MB (%.2fx the weights)", rss / 1e6, rss / weights) or "unknown"))
