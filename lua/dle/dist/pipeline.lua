--- dle.dist.pipeline: pipeline parallelism, one stage (a module) per rank, over dist's point-to-point
-- calls.
--
--   local pipe = dle.dist.pipeline(stages, {microbatches = 4, loss_fn = F.cross_entropy})
--   local loss = pipe:step(x, y)    -- the mean loss on the last rank (nil elsewhere)
--   opt:step()                      -- each rank steps its own stage's parameters
--
-- stages[r + 1] is rank r's module: rank 0 feeds it the batch x, every other rank the output of the
-- rank before; the last rank's output goes to loss_fn with y. pipe:step(x, y) splits the batch
-- (dim 1) into `microbatches` equal parts and runs their forwards and backwards in the schedule's
-- order: "gpipe" runs every forward, then every backward; "1f1b" (the default, as Megatron-LM's
-- non-interleaved schedule) runs p - r - 1 forwards on rank r of p, then alternates one forward and
-- one backward, then the remaining backwards, so that at most p microbatches' activations are held.
-- Each microbatch's loss is divided by the number of microbatches, so the gradients left on each
-- stage's parameters are those of the whole batch's mean loss, as one process would compute them.
-- Only x is read on rank 0 and only y on the last rank (the others may pass nil).
--
-- Activations and gradients cross ranks as non-blocking sends (dist.isend: a shape header, then the
-- values) and blocking receives, which no order of the two schedules can deadlock. pipe.bubble is the
-- schedules' idle fraction in theory, (p - 1) / (m + p - 1); after a step, pipe.waited and
-- pipe.seconds are this rank's time spent waiting to receive and the step's time.
local dle = require("dle")
local check = require("dle.check")

local dist = dle.dist

local Pipeline = {}
Pipeline.__index = Pipeline
Pipeline.__name = "dle.dist.Pipeline"

local DTYPES = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"}
local DTYPE_INDEX = {}
for i, d in ipairs(DTYPES) do DTYPE_INDEX[d] = i end
local MAX_DIMS = 8
local TAG_HEADER, TAG_VALUES = 101, 102

-- Sends t to rank dst without blocking: a header {ndim, dtype, sizes...}, then its values.
function Pipeline:_send(t, dst)
  t = t:detach():contiguous()
  if t:dim() > MAX_DIMS then
    check.error(("pipeline: a tensor of %d dims crosses ranks (at most %d)"):format(t:dim(), MAX_DIMS))
  end
  local code = DTYPE_INDEX[t:dtype()] or check.error("pipeline: dtype " .. t:dtype() .. " cannot cross ranks")
  local header = {t:dim(), code}
  for _, s in ipairs(t:shape()) do header[#header + 1] = s end
  while #header < MAX_DIMS + 2 do header[#header + 1] = 0 end
  local h = dle.tensor(header, {dtype = "int64"})
  self.works[#self.works + 1] = dist.isend(h, dst, {tag = TAG_HEADER})
  self.works[#self.works + 1] = dist.isend(t, dst, {tag = TAG_VALUES})
end

-- Receives the next tensor rank src sent with _send.
function Pipeline:_recv(src)
  local t0 = dle.time()
  local h = dle.zeros(MAX_DIMS + 2, {dtype = "int64"})
  dist.recv(h, src, {tag = TAG_HEADER})
  local header = h:totable()
  if header[1] < 0 or header[1] > MAX_DIMS or not DTYPES[header[2]] then
    check.error(("pipeline: rank %d sent a malformed tensor header (not from a pipeline?)"):format(src))
  end
  local shape = {table.unpack(header, 3, 2 + header[1])}
  local t = dle.empty(shape, {dtype = DTYPES[header[2]]})
  dist.recv(t, src, {tag = TAG_VALUES})
  self.waited = self.waited + (dle.time() - t0)
  return t
end

-- Microbatch i's forward on this rank.
function Pipeline:_forward(i)
  local input
  if self.rank == 0 then
    input = self.x_parts[i]
  else
    input = self:_recv(self.rank - 1)
    if input:is_floating_point() then input:requires_grad_(true) end
  end
  local out = self.stage(input)
  if not dle.is_tensor(out) then check.error("pipeline: stage " .. self.rank .. " must return one tensor") end
  local held = {input = input}
  if self.rank == self.world - 1 then
    local loss = self.loss_fn(out, self.y_parts[i])
    if not dle.is_tensor(loss) or loss:numel() ~= 1 then
      check.error("pipeline: loss_fn must return a one-element tensor, got " .. check.typename(loss))
    end
    held.loss = loss / self.microbatches
    self.total = self.total + held.loss:item()
  else
    self:_send(out, self.rank + 1)
    held.out = out
  end
  self.held[i] = held
end

-- Microbatch i's backward on this rank: its output's gradient (from the rank after, or the loss),
-- then its input's gradient to the rank before.
function Pipeline:_backward(i)
  local held = self.held[i]
  self.held[i] = nil
  if held.loss then
    held.loss:backward()
  elseif held.out.requires_grad then
    dle.backward({held.out}, {self:_recv(self.rank + 1)})
  else
    self:_recv(self.rank + 1)   -- nothing to differentiate here; the message is still taken
  end
  if self.rank > 0 then
    local g = held.input.grad or dle.zeros_like(held.input)
    self:_send(g, self.rank - 1)
  end
end

-- The parts of t along dim 1, or an error naming what when it does not split evenly.
local function parts_of(t, m, what)
  check.tensor(t, "pipeline:step", what)
  if t:dim() < 1 or t:size(1) % m ~= 0 then
    check.error(("pipeline:step: %s of shape %s does not split into %d equal microbatches along dim 1"):format(
      what, check.shape_str(t), m))
  end
  local out, n = {}, t:size(1) // m
  for i = 1, m do out[i] = t:narrow(1, (i - 1) * n + 1, n) end
  return out
end

--- pipe:step(x, y) -> the batch's mean loss on the last rank, nil on the others; leaves the whole
-- batch's gradients on each stage's parameters (accumulated into .grad, as backward does).
function Pipeline:step(x, y)
  local m = self.microbatches
  if self.rank == 0 then self.x_parts = parts_of(x, m, "x") end
  if self.rank == self.world - 1 then self.y_parts = parts_of(y, m, "y") end
  self.held, self.works, self.total, self.waited = {}, {}, 0, 0
  local t0 = dle.time()
  if self.schedule == "gpipe" then
    for i = 1, m do self:_forward(i) end
    for i = 1, m do self:_backward(i) end
  else
    local warmup = math.min(self.world - self.rank - 1, m)
    for i = 1, warmup do self:_forward(i) end
    for j = 1, m - warmup do
      self:_forward(warmup + j)
      self:_backward(j)
    end
    for j = m - warmup + 1, m do self:_backward(j) end
  end
  for _, w in ipairs(self.works) do w:wait() end
  self.works, self.x_parts, self.y_parts = {}, nil, nil
  self.seconds = dle.time() - t0
  if self.rank == self.world - 1 then return self.total end
  return nil
end

--- dle.dist.pipeline(stages, {microbatches = world_size(), schedule = "1f1b" | "gpipe", loss_fn})
-- -> a pipeline of rank r's stages[r + 1] (see above).
return function(stages, opts)
  opts = check.options(opts, "pipeline", {"microbatches", "schedule", "loss_fn"})
  check.table(stages, "pipeline", "stages")
  local world, rank = dist.world_size(), dist.rank()
  if #stages ~= world then
    check.error(("pipeline: stages must hold one module per rank (%d), got %d"):format(world, #stages))
  end
  local m = opts.microbatches == nil and world or check.integer(opts.microbatches, "pipeline", "microbatches")
  if m < 1 then check.error("pipeline: microbatches must be at least 1, got " .. m) end
  local schedule = opts.schedule or "1f1b"
  if schedule ~= "1f1b" and schedule ~= "gpipe" then
    check.error("pipeline: schedule must be \"1f1b\" or \"gpipe\", got " .. tostring(schedule))
  end
  check.callable(opts.loss_fn, "pipeline", "loss_fn")
  return setmetatable({stage = stages[rank + 1], rank = rank, world = world, microbatches = m,
                       schedule = schedule, loss_fn = opts.loss_fn, bubble = (world - 1) / (m + world - 1),
                       waited = 0, seconds = 0}, Pipeline)
end
