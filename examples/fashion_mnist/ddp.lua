--- Fashion-MNIST with the MLP of mlp.lua, trained data-parallel over MPI (dle.dist): every rank
-- (process) trains on its own shard of the training images, DistributedDataParallel averages the
-- gradients across ranks after each backward, and ZeroRedundancyOptimizer keeps each rank's share
-- of the Adam state only. Test accuracy is counted on shards too and summed across ranks; rank 0
-- prints. A short run by default (the first 12000 training images, one epoch: a few seconds):
--   mpirun --allow-run-as-root -np 2 scripts/dle examples/fashion_mnist/ddp.lua [--epochs 1] [--batch-size 128]
--       [--images 12000] [--zero-stage 1]      (or: scripts/dle --nproc 2 examples/fashion_mnist/ddp.lua ...)
-- batch_size is the global batch (each rank takes batch_size / world_size of it); images: how
-- many training images to use (0: all 60000). Without mpirun it runs as a world of one process.
local dle = require("dle")
local dist = dle.dist

-- <close>: an error on one rank then aborts every rank instead of leaving them waiting for it
local pg <close> = dist.init() -- luacheck: ignore 211 (used by its <close>)
local rank, world = dist.rank(), dist.world_size()
-- the ranks share the machine's cores
dle.set_num_threads(math.max(1, dle.get_num_threads() // world))

local cli = require("argparse")("ddp.lua", "Fashion-MNIST's MLP trained data-parallel over MPI.")
cli:option("--epochs", "training epochs", 1, tonumber)
cli:option("--batch-size", "global batch size", 128, math.tointeger)
cli:option("--images", "training images to use (0: all)", 12000, math.tointeger)
cli:option("--log-dir", "where rank 0 writes the run's JSONL log and SVG curves", "runs")
cli:option("--zero-stage", "0: DDP and Adam; 1: DDP and ZeRO stage 1; 2, 3: ZeRO stage 2 or 3 alone", 1,
           math.tointeger)
local args = cli:parse(arg)
local epochs, batch_size, images = args.epochs, args.batch_size, args.images
local function say(...) if rank == 0 then print(string.format(...)) end end

local here = arg[0]:match("^(.*/)") or ""
local common, models = dofile(here .. "common.lua"), dofile(here .. "models.lua")
local train_x, train_y, test_x, test_y = common.load()
train_x, test_x = train_x:view(-1, 784), test_x:view(-1, 784)
if images > 0 and images < train_x:size(1) then
  train_x, train_y = train_x:narrow(1, 1, images), train_y:narrow(1, 1, images)
end

-- rank r's shard: the r-th of world equal slices (the same number of steps on every rank)
local function shard(t)
  local n = t:size(1) // world
  return t:narrow(1, rank * n + 1, n)
end
local xs, ys = shard(train_x), shard(train_y)

dle.manual_seed(rank)   -- a different init on each rank: DistributedDataParallel broadcasts rank 0's
-- stages 0 and 1 average the gradients in DistributedDataParallel; stages 2 and 3 do it themselves
-- (on the bare model; they do not start from one init: broadcast rank 0's first)
local stage = args.zero_stage
local model = stage <= 1 and dist.DistributedDataParallel(models.mlp()) or models.mlp()
if stage >= 2 then
  for _, p in ipairs(model:parameters()) do dle.no_grad(function() dist.broadcast(p, 0) end) end
end
local opt = stage == 0 and dle.optim.Adam(model:parameters(), {lr = 2e-3})
  or dle.optim.ZeroRedundancyOptimizer(dle.optim.Adam, stage <= 1 and model:parameters() or model,
                                       {lr = 2e-3, stage = math.max(stage, 1)})
local loss_fn = dle.nn.CrossEntropyLoss()
local per_rank = math.max(1, batch_size // world)
local loader = dle.data.DataLoader({xs, ys}, {batch_size = per_rank, shuffle = true, drop_last = true,
                                              generator = dle.Generator(rank)})
say("%d rank%s, %d training images each, batch %d per rank, %s", world, world == 1 and "" or "s",
    xs:size(1), per_rank, stage == 0 and "Adam" or "ZeRO stage " .. stage)

-- Test accuracy: each rank counts its shard of the test set, the counts are summed.
local function accuracy()
  model:eval()
  local x, y = shard(test_x), shard(test_y)
  local correct = dle.no_grad(function()
    return model(x):argmax(2):eq(y):sum():to("float64")
  end)
  model:train()
  return dist.all_reduce(correct, "sum"):item() / (x:size(1) * world)
end

-- rank 0 shows a progress bar and logs its steps to <log-dir>/fashion_mnist_ddp.jsonl
local log, step, run_path = nil, 0, args.log_dir .. "/fashion_mnist_ddp"
if rank == 0 then
  os.execute("mkdir -p '" .. args.log_dir:gsub("'", "'\\''") .. "'")
  log = dle.log.open(run_path .. ".jsonl", {truncate = true})
end
for epoch = 1, epochs do
  local t0, total, seen = dle.time(), 0, 0
  local batches = rank == 0 and dle.progress(loader, {desc = "epoch " .. epoch}) or loader
  for x, y in batches do
    local loss = loss_fn(model(x), y)
    opt:zero_grad()
    loss:backward()   -- DistributedDataParallel (or ZeRO stages 2, 3) averages the gradients here
    opt:step()        -- under ZeRO each rank steps its share, then the ranks exchange them
    local l = loss:item()
    total = total + l * x:size(1)
    seen = seen + x:size(1)
    if log then
      step = step + 1
      batches:set{loss = l}
      log:write{step = step, loss = l}
    end
  end
  local dt = dle.time() - t0
  -- the mean loss over every rank's samples
  local sums = dist.all_reduce(dle.tensor({total, seen}, {dtype = "float64"}), "sum"):totable()
  local acc = accuracy()
  say("epoch %d  loss %.4f  test accuracy %.4f  %.0f samples/s  (%.1f s)", epoch, sums[1] / sums[2],
      acc, sums[2] / dt, dt)
  if log then log:write{step = step, epoch = epoch, epoch_loss = sums[1] / sums[2], test_accuracy = acc} end
end
if log then
  log:close()
  dle.plot.from_log(run_path .. ".jsonl", run_path .. ".svg", {"loss", "epoch_loss", "test_accuracy"},
                    {title = "fashion_mnist_ddp"})
  say("curves: %s.svg (log: %s.jsonl)", run_path, run_path)
end
