--- The cost of tensor parallelism's machinery on one rank: dle.dist.tensor_parallel.TransformerBlock
-- (split attention and MLP, its all-reduces, here over a world of one) against the dense
-- nn.TransformerBlock it equals, forward and backward, best of several rounds each.
--   scripts/dle --threads 1 examples/dist/tp_overhead.lua [--d 256] [--heads 8] [--batch 8] [--seq 64]
-- Prints both times and the overhead (tensor-parallel time / dense time - 1).
local dle = require("dle")
local pg <close> = dle.dist.init() -- luacheck: ignore 211 (used by its <close>)
local cli = require("argparse")("tp_overhead.lua", "Tensor-parallel TransformerBlock against the dense one, 1 rank.")
cli:option("--d", "model width", 256, math.tointeger)
cli:option("--heads", "attention heads", 8, math.tointeger)
cli:option("--batch", "sequences per batch", 8, math.tointeger)
cli:option("--seq", "sequence length", 64, math.tointeger)
cli:option("--rounds", "timed rounds (the best counts)", 5, math.tointeger)
local args = cli:parse(arg)

local opts = {causal = true, generator = dle.Generator(1)}
local dense = dle.nn.TransformerBlock(args.d, args.heads, opts)
local split = dle.dist.tensor_parallel.TransformerBlock(args.d, args.heads, {causal = true})
split:load_dense(dense)
local x = dle.randn(args.batch, args.seq, args.d, {generator = dle.Generator(2)}):requires_grad_(true)

-- seconds per forward + backward of block: the best of the rounds' means
local function time(block)
  local function once()
    x.grad = nil
    block:zero_grad()
    block(x):sum():backward()
  end
  for _ = 1, 3 do once() end
  local best = math.huge
  for _ = 1, args.rounds do
    local n, t0 = 10, dle.time()
    for _ = 1, n do once() end
    best = math.min(best, (dle.time() - t0) / n)
  end
  return best
end

local worst = dle.no_grad(function() return (split(x) - dense(x)):abs():max():item() end)
-- alternate, so that a busy moment of the machine does not fall on one of them only
local td, tt = math.huge, math.huge
for _ = 1, 2 do
  td = math.min(td, time(dense))
  tt = math.min(tt, time(split))
end
print(string.format("TransformerBlock d=%d heads=%d x {%d,%d,%d}, %d thread(s), forward + backward:", args.d,
                    args.heads, args.batch, args.seq, args.d, dle.get_num_threads()))
print(string.format("  dense            %8.3f ms", td * 1e3))
print(string.format("  tensor parallel  %8.3f ms  (1 rank; outputs differ by %.2g)", tt * 1e3, worst))
print(string.format("  overhead         %+7.1f %%", (tt / td - 1) * 100))
