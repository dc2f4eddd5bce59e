--- What ZeRO saves: the bytes each rank holds for parameters, gradients and optimizer state after a
-- training step (dle.memory_stats().allocated, the allocator's count of live tensor bytes, less
-- what was live before the model was built), beside the seeds' accounting: per parameter, 4 + 4 + 8
-- bytes in float32 (params, gradients, Adam's two moments) and 2 + 2 + 12 under mixed precision
-- (bfloat16 params and gradients; float32 master copy and moments), of which stage 1 divides the
-- optimizer state by the world size, stage 2 also the gradients, stage 3 also the parameters.
--   scripts/dle --nproc 2 examples/dist/zero_memory.lua [--width 512]
-- Each rank prints its lines: rank, stage, dtype, measured and expected MB, their ratio.
local dle = require("dle")
local dist = dle.dist

local pg <close> = dist.init() -- luacheck: ignore 211 (used by its <close>)
local rank, world = dist.rank(), dist.world_size()
dle.set_num_threads(1)
local cli = require("argparse")("zero_memory.lua", "Bytes per rank under ZeRO stages 1, 2, 3.")
cli:option("--width", "width of the 4 layers of the MLP", 512, math.tointeger)
local args = cli:parse(arg)

-- bytes per parameter: {params, gradients, optimizer state}
local SEEDS = {float32 = {4, 4, 8}, bfloat16 = {2, 2, 12}}

--- The seeds' bytes per parameter on one of world ranks under stage.
local function expected(dtype, stage)
  local p, g, o = table.unpack(SEEDS[dtype])
  if stage >= 3 then p = p / world end
  if stage >= 2 then g = g / world end
  return p + g + o / world
end

-- A no-op custom autograd op: recording one releases the contexts of dead custom nodes (stage 3's
-- gathers and checkpoints), which dle frees at the next recording, not at collection.
local Noop = dle.autograd.Function{forward = function(_, t) return t * 1 end, backward = function(_, g) return g end}

local function live()
  Noop(dle.zeros(1):requires_grad_(true))
  for _ = 1, 4 do collectgarbage("collect") end
  return dle.memory_stats().allocated
end

dle.manual_seed(0)
local w = args.width
local x, y = dle.randn(32, w), dle.randint(1, w + 1, {32})
for _, dtype in ipairs({"float32", "bfloat16"}) do
  local xd = x:to(dtype)
  for stage = 1, 3 do
    local before = live()
    dle.manual_seed(1)
    -- four equal layers: stage 1's partition (whole parameters) splits them evenly over 1, 2 or 4 ranks
    local model = dle.nn.Sequential(dle.nn.Linear(w, w), dle.nn.ReLU(), dle.nn.Linear(w, w), dle.nn.ReLU(),
                                    dle.nn.Linear(w, w), dle.nn.ReLU(), dle.nn.Linear(w, w))
    if dtype ~= "float32" then model:to(dtype) end
    local n = model:num_parameters()
    local opt = dle.optim.ZeroRedundancyOptimizer(dle.optim.AdamW, model, {stage = stage, lr = 1e-3})
    -- every rank on the same batch: the gradients need no averaging under stage 1 (no DDP here)
    opt:zero_grad()
    dle.nn.functional.cross_entropy(model(xd), y):backward()
    opt:step()
    local measured = live() - before
    local want = expected(dtype, stage) * n
    print(string.format("rank %d  stage %d  %-8s  %d params  measured %8.3f MB  seeds %8.3f MB  ratio %.3f", rank,
                        stage, dtype, n, measured / 1e6, want / 1e6, measured / want))
    model, opt = nil, nil -- luacheck: ignore 311 (freed before the next row's baseline)
  end
end
