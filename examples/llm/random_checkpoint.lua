--- examples/llm/random_checkpoint.lua — writes a randomly initialised language model as a Hugging Face
-- checkpoint directory (config.json, model.safetensors, and a byte-level tokenizer.json whose
-- vocabulary is the 256 bytes), to try examples/llm/generate.lua and measure memory and speed without
-- downloading weights:
--   dle examples/llm/random_checkpoint.lua DIR [gpt2|llama] [tiny|small|124m]
-- tiny: 2 layers of width 64; small: 6 layers of width 384 (the bench's shape); 124m: GPT-2 124M's
-- shape (12 layers, width 768, vocab 50257: about 500 MB of float32).
local dle = require("dle")

local cli = require("argparse")("random_checkpoint.lua", "A randomly initialised checkpoint directory.")
cli:argument("dir", "the directory to write")
cli:argument("arch", "gpt2 or llama", "gpt2"):choices({"gpt2", "llama"}):args("?")
cli:argument("size", "tiny, small or 124m", "tiny"):choices({"tiny", "small", "124m"}):args("?")
local opts = cli:parse(arg)
local dir, arch, size = opts.dir, opts.arch, opts.size
local SIZES = {tiny = {2, 64, 4, 256}, small = {6, 384, 6, 256}, ["124m"] = {12, 768, 12, 50257}}
local s = SIZES[size] or error("unknown size " .. tostring(size))
local layers, width, heads, vocab = s[1], s[2], s[3], s[4]
local g = dle.Generator(1)
local model
if arch == "gpt2" then
  model = dle.models.gpt2.GPT2({vocab_size = vocab, n_positions = 1024, n_embd = width, n_layer = layers,
    n_head = heads}, {generator = g})
else
  model = dle.models.llama.Llama({vocab_size = vocab, hidden_size = width, intermediate_size = 8 * width // 3,
    num_hidden_layers = layers, num_attention_heads = heads, num_key_value_heads = math.max(1, heads // 2),
    max_position_embeddings = 1024, tie_word_embeddings = true}, {generator = g})
end
model:save_pretrained(dir)

-- a byte-level tokenizer: one token per byte (ids 0..255), no merges; a larger vocabulary's other ids
-- are byte pairs (never produced by encode, but decodable)
local bytes = require("dle.tokenizer.bytes")
local items = {}
for b = 0, 255 do items[#items + 1] = dle.io.json_string(bytes.char_of[b]) .. ":" .. b end
for id = 256, vocab - 1 do
  local a, b = (id - 256) // 256, (id - 256) % 256
  items[#items + 1] = dle.io.json_string(bytes.char_of[a] .. bytes.char_of[b]) .. ":" .. id
end
local f = assert(io.open(dir .. "/tokenizer.json", "wb"))
f:write('{"version":"1.0","added_tokens":[],"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false},'
  .. '"model":{"type":"BPE","vocab":{' .. table.concat(items, ",") .. '},"merges":[]}}\n')
f:close()
print(string.format("wrote %s: %s, %d layers, width %d, vocab %d, %d parameters", dir, arch, layers, width, vocab,
  model:num_parameters()))
