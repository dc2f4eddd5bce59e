--- Data-parallel scaling of the Fashion-MNIST MLP (examples/fashion_mnist/models.lua): samples/s of
-- DistributedDataParallel training on 1 rank and on N ranks of one thread each, every rank with
-- the same batch (weak scaling, as data-parallel throughput is measured), and their ratio.
--   scripts/dle examples/dist/ddp_scaling.lua [--ranks 2] [--batch 128] [--steps 400] [--repeat 3]
-- It runs itself under `dle --nproc` once per world size and repetition (the best run counts) and
-- prints one line per world size and the ratio. Quiet machine wanted: the ranks need a core each.
local dle = require("dle")

local cli = require("argparse")("ddp_scaling.lua", "Samples/s of data-parallel MLP training, 1 rank vs N.")
cli:option("--ranks", "the larger world size", 2, math.tointeger)
cli:option("--batch", "batch per rank", 128, math.tointeger)
cli:option("--steps", "timed steps per run (after 30 of warm-up)", 400, math.tointeger)
cli:option("--repeat", "runs per world size (the best counts)", 3, math.tointeger)
cli:option("--zero-stage", "0: DistributedDataParallel and Adam; 2: ZeRO stage 2 (sharded Adam, "
           .. "gradients reduce-scattered)", 0, math.tointeger):choices({"0", "2"})
cli:flag("--worker", "(internal) train as one rank and report")
local args = cli:parse(arg)
local here = arg[0]:match("^(.*/)") or ""

if args.worker then
  local dist = dle.dist
  local pg <close> = dist.init() -- luacheck: ignore 211 (used by its <close>)
  local rank, world = dist.rank(), dist.world_size()
  dle.set_num_threads(1)
  local common = dofile(here .. "../fashion_mnist/common.lua")
  local models = dofile(here .. "../fashion_mnist/models.lua")
  local train_x, train_y = common.load()
  train_x = train_x:view(-1, 784)
  local n = train_x:size(1) // world   -- rank r's shard of the training set
  local xs, ys = train_x:narrow(1, rank * n + 1, n), train_y:narrow(1, rank * n + 1, n)
  dle.manual_seed(1)
  local model, opt
  if args.zero_stage == 2 then   -- rank 0's initial parameters everywhere, then sharded Adam
    model = models.mlp()
    for _, p in ipairs(model:parameters()) do dle.no_grad(function() dist.broadcast(p, 0) end) end
    opt = dle.optim.ZeroRedundancyOptimizer(dle.optim.Adam, model, {lr = 1e-3, stage = 2})
  else
    model = dist.DistributedDataParallel(models.mlp())
    opt = dle.optim.Adam(model:parameters(), {lr = 1e-3})
  end
  local loss_fn = dle.nn.CrossEntropyLoss()
  local loader = dle.data.DataLoader({xs, ys}, {batch_size = args.batch, shuffle = true, drop_last = true,
                                                generator = dle.Generator(rank)})
  local function step(x, y)
    local loss = loss_fn(model(x), y)
    opt:zero_grad()
    loss:backward()
    opt:step()
    return loss
  end
  local done, t0, loss = 0, nil, nil
  while done < args.steps + 30 do
    for x, y in loader do
      if done == 30 then t0 = dle.time() end
      loss = step(x, y)
      done = done + 1
      if done == args.steps + 30 then break end
    end
  end
  loss:item()
  -- the slowest rank's time: every rank took the same number of steps
  local dt = dist.all_reduce(dle.tensor({dle.time() - t0}, {dtype = "float64"}), "max"):item()
  if rank == 0 then
    print(string.format("samples/s %.1f", args.steps * args.batch * world / dt))
  end
  return
end

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
-- samples/s of a run on world ranks (the best of args["repeat"] runs)
local function run(world)
  local best = 0
  for _ = 1, args["repeat"] do
    -- waiting ranks yield their core (mpi_yield_when_idle) rather than spin on it
    local cmd = table.concat({"OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1", q(arg[-1]), "--threads 1 --nproc",
      world, q(arg[0]), "--worker --zero-stage", args.zero_stage, "--batch", args.batch, "--steps", args.steps,
      "2>&1"}, " ")
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    p:close()
    local rate = tonumber(out:match("samples/s ([%d.]+)"))
    if not rate then error("ddp_scaling: the run on " .. world .. " rank(s) failed:\n" .. out, 0) end
    best = math.max(best, rate)
  end
  return best
end

local one = run(1)
print(string.format("1 rank,  1 thread, batch %d:            %9.0f samples/s", args.batch, one))
local many = run(args.ranks)
print(string.format("%d ranks, 1 thread each, batch %d each: %9.0f samples/s", args.ranks, args.batch, many))
print(string.format("scaling: %.2fx the samples/s of 1 rank (ideal %d.00x)", many / one, args.ranks))
