-- The example scripts themselves, run as a user runs them (scripts/dle examples/...), on a small
-- slice of their data so each takes seconds: they must exit cleanly and print what their headers
-- promise (loss, test accuracy and throughput per epoch; for the GPT FLOPs, MFU and a sample).
-- Their full-length results are recorded in their headers, not tested here.
local FM_FILE = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"

local H = require("helpers")
local exists, have_command = H.exists, H.have_command

-- Runs `scripts/dle args` with the environment prefix `env`; returns its output and success.
local function run(env, args)
  local p = io.popen(env .. " scripts/dle " .. args .. " 2>&1")
  local out = p:read("a")
  local ok = p:close()
  return out, ok
end

-- it(), or pending with the reason when `missing` names what the run needs and lacks.
local function it_with(missing, name, fn)
  if missing then pending(name .. " (" .. missing .. ")") else it(name, fn) end
end

describe("examples/fashion_mnist", function()
  local missing = not exists(FM_FILE) and "Fashion-MNIST files absent: Debian package dataset-fashion-mnist" or nil

  it_with(missing, "mlp.lua trains an epoch on 2000 images and prints loss, accuracy and samples/s", function()
    local out, ok = run("DLE_EXAMPLE_LIMIT=2000", "examples/fashion_mnist/mlp.lua --epochs 1 --batch-size 64")
    assert.is_true(ok, out)
    local loss, acc = out:match("epoch 1  loss (%S+)  test accuracy (%S+)  %d+ samples/s")
    assert.truthy(loss, out)
    -- 1 epoch on 2000 images: far from the full run's 0.887, well above chance (0.1)
    assert.is_true(tonumber(acc) > 0.5, out)
  end)

  it_with(missing, "cnn.lua trains an epoch on 1000 images with its default recipe", function()
    local out, ok = run("DLE_EXAMPLE_LIMIT=1000", "examples/fashion_mnist/cnn.lua --epochs 1")
    assert.is_true(ok, out)
    assert.truthy(out:match("BatchNorm1d"), "the summary lists the hidden layer's BatchNorm:\n" .. out)
    local acc = out:match("epoch 1  loss %S+  test accuracy (%S+)  %d+ samples/s")
    assert.truthy(acc, out)
    assert.is_true(tonumber(acc) > 0.4, out)
  end)
end)

describe("examples/char_gpt/train.lua", function()
  local missing = not have_command("bible") and not exists((os.getenv("HOME") or "") .. "/.cache/dle/kjv.txt")
    and "the KJV text is absent: Debian packages bible-kjv-text and bible-kjv" or nil

  it_with(missing,
      "trains a few steps of a small GPT, reports FLOPs and MFU (at most 100%), profiles a step and samples", function()
    local dir = H.tmpdir()
    local out,
        ok = run("", "examples/char_gpt/train.lua --steps 6 --batch 4 --context 32 --layers 1 --d 32 --heads 2 "
                  .. "--print-every 3 --sample 20 --profile --log-dir " .. dir)
    assert.is_true(ok, out)
    -- every step in the log, the interval means at steps 3 and 6, the curves drawn from it
    local rows = H.check_run_files(dir .. "/char_gpt.jsonl", dir .. "/char_gpt.svg", "loss", 6)
    assert.are.equal(8, #rows)
    assert.truthy(out:find("curves: " .. dir .. "/char_gpt.svg", 1, true), out)
    local first, last = out:match("loss (%S+) %-> (%S+)")
    assert.truthy(first, out)
    assert.is_true(tonumber(last) < tonumber(first), "loss did not fall:\n" .. out)
    local n = 0
    for mfu in out:gmatch("MFU (%S+)%%") do
      n = n + 1
      assert.is_true(tonumber(mfu) > 0 and tonumber(mfu) <= 100, "MFU " .. mfu .. "%:\n" .. out)
    end
    assert.are.equal(2, n, out)
    -- --profile: the table of one step, 5 Linear products forward and 10 backward; the products'
    -- FLOPs the profiler counts agree with the formula (which also counts biases and LayerNorm
    -- weights as matmul parameters) to a few percent
    assert.truthy(out:match("\nmatmul +15 "), out)
    local counted,
        formula = out:match("FLOPs: %S+ counted by dle.profile, (%S+) of them in matmul/sdpa; formula above (%S+)")
    assert.truthy(counted, out)
    assert.is_true(math.abs(tonumber(counted) / tonumber(formula) - 1) < 0.05, out)
    assert.truthy(out:match("sample %(temperature"), out)
  end)
end)

describe("examples/llm", function()
  for _, arch in ipairs({"gpt2", "llama"}) do
    it("random_checkpoint.lua writes a tiny " .. arch .. " checkpoint; generate.lua continues a prompt from it and "
        .. "prints tokens/s, KV-cache bytes per token and peak memory", function()
      local dir = H.tmpdir()
      local out, ok = run("", "examples/llm/random_checkpoint.lua " .. dir .. " " .. arch .. " tiny")
      assert.is_true(ok, out)
      out, ok = run("", "examples/llm/generate.lua " .. dir .. " 'Once upon a time' --max-new 12 --temperature 0")
      os.execute("rm -rf '" .. dir .. "'")
      assert.is_true(ok, out)
      -- one token per byte: the prompt's 16 bytes, then 12 new tokens
      assert.truthy(out:match("^Once upon a time"), out)
      assert.truthy(out:match("prompt 16 tokens, prefill %S+ s; 12 new tokens in %S+ s: %S+ tokens/s"), out)
      local kv = tonumber(out:match("KV cache (%d+) bytes per token"))
      -- 2 layers x (keys + values) x width 64 (gpt2) or 2 of 4 heads of 16 (llama) x 4 bytes
      assert.are.equal(arch == "gpt2" and 2 * 2 * 64 * 4 or 2 * 2 * 32 * 4, kv)
      assert.truthy(out:match("peak resident memory %S+ MB"), out)
    end)
  end

  it("generate.lua reads the checkpoint as a GGUF file (same greedy text) and quantizes with --quantize", function()
    local dir = H.tmpdir()
    -- GPT-2: the tiny Llama's MLP width (170) is no multiple of the 32 of a Q8_0 block
    local out, ok = run("", "examples/llm/random_checkpoint.lua " .. dir .. " gpt2 tiny")
    assert.is_true(ok, out)
    out, ok = run("", "-e 'local dle = require \"dle\"; dle.models.gpt2.from_pretrained(\"" .. dir
      .. "\"):save_gguf(\"" .. dir .. "/m.gguf\")'")
    assert.is_true(ok, out)
    local args = " 'Once upon a time' --max-new 12 --temperature 0"
    local from_dir = run("", "examples/llm/generate.lua " .. dir .. args)
    local from_gguf
    from_gguf, ok = run("", "examples/llm/generate.lua " .. dir .. "/m.gguf" .. args .. " --tokenizer " .. dir)
    assert.is_true(ok, from_gguf)
    assert.are.equal(from_dir:match("^(.-)\n%-%-%-%-"), from_gguf:match("^(.-)\n%-%-%-%-"))
    local q
    q, ok = run("", "examples/llm/generate.lua " .. dir .. "/m.gguf" .. args .. " --tokenizer " .. dir
      .. " --quantize q8_0")
    os.execute("rm -rf '" .. dir .. "'")
    assert.is_true(ok, q)
    assert.truthy(q:match("12 new tokens in %S+ s"), q)
    assert.truthy(q:match("weights %S+ MB %(q8_0%)"), q)
  end)
end)
