--- examples/llm/generate.lua — text generation from a checkpoint directory:
--   dle examples/llm/generate.lua CHECKPOINT_DIR "prompt" [options]
-- CHECKPOINT_DIR holds config.json, model.safetensors (or a sharded index) and tokenizer.json (or
-- vocab.json + merges.txt); model_type "gpt2" is GPT-2, anything else the Llama architecture (llama,
-- mistral, qwen2, smollm). An llm.c checkpoint (a .bin file) needs --tokenizer DIR.
-- Options: --max-new N (default 50), --temperature T (default 0.8; 0 is greedy), --top-k K, --top-p P,
--   --seed S (default 1), --threads N, --tokenizer DIR.
-- Prints the text, then the prompt and generated token counts, tokens/s of the decoding, the
-- KV-cache bytes per token, the weights' bytes and the process's peak resident memory.
local dle = require "dle"

local function usage(msg)
  io.stderr:write((msg and msg .. "\n" or "") .. "usage: dle examples/llm/generate.lua CHECKPOINT_DIR \"prompt\" "
    .. "[--max-new N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--threads N] [--tokenizer DIR]\n")
  os.exit(2)
end

local path, prompt = arg[1], arg[2]
if not path or not prompt then usage() end
local o = {["max-new"] = 50, temperature = 0.8, seed = 1}
local i = 3
while i <= #arg do
  local k = arg[i]:match("^%-%-(.+)$")
  if not k or arg[i + 1] == nil then usage("bad option " .. arg[i]) end
  o[k] = k == "tokenizer" and arg[i + 1] or tonumber(arg[i + 1]) or usage("not a number: " .. arg[i + 1])
  i = i + 2
end
if o.threads then dle.set_num_threads(math.tointeger(o.threads)) end

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
if path:match("%.bin$") then
  if not o.tokenizer then usage("an llm.c checkpoint needs --tokenizer DIR") end
  model = dle.models.gpt2.from_llmc(path)
else
  local f = io.open(path .. "/config.json")
  if not f then usage("no config.json in " .. path) end
  local config = dle.io.json_decode(f:read("a"))
  f:close()
  local family = config.model_type == "gpt2" and dle.models.gpt2 or dle.models.llama
  model = family.from_pretrained(path)
end
tok = dle.tokenizer.load(o.tokenizer or path)
local load_seconds = dle.time() - t0

local ids = tok:encode(prompt)
if ids:numel() == 0 then usage("the prompt encodes to no tokens") end
local out, stats = model:generate(ids, {
  max_new_tokens = math.tointeger(o["max-new"]), temperature = o.temperature,
  top_k = o["top-k"] and math.tointeger(o["top-k"]), top_p = o["top-p"],
  generator = dle.Generator(math.tointeger(o.seed)),
})
print(tok:decode(out[1]))
print("----")
local weights = 0
for _, p in ipairs(model:parameters()) do weights = weights + p:numel() * 4 end
print(string.format("load %.2f s; prompt %d tokens, prefill %.3f s; %d new tokens in %.3f s: %.1f tokens/s",
  load_seconds, ids:numel(), stats.prefill_seconds, stats.new_tokens, stats.decode_seconds,
  stats.new_tokens / math.max(stats.decode_seconds, 1e-9)))
local rss = peak_rss()
print(string.format("KV cache %d bytes per token; weights %.1f MB (float32); peak resident memory %s",
  stats.kv_cache_bytes_per_token, weights / 1e6,
  rss and string.format("%.1f MB (%.2fx the weights)", rss / 1e6, rss / weights) or "unknown"))
