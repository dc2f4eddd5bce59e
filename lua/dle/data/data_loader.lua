--- dle.data.DataLoader: mini-batches over tensors sharing dim 1, or over a dataset object.
--   local loader = dle.data.DataLoader({x, y}, {batch_size = 64, shuffle = true, generator = g})
--   for epoch = 1, 10 do for xb, yb in loader do ... end end   -- each `for` is one epoch
-- Shuffled orders come from dle.randperm with the generator, so a seed fixes every epoch's batches.
local dle = require("dle")
local check = require("dle.check")

local DataLoader = {}
DataLoader.__index = DataLoader
DataLoader.__name = "dle.data.DataLoader"

local core = require("dle.core")
local is_tensor = core.is_tensor


--- Creates a loader.
-- @param source a list of tensors sharing dim 1 (a single tensor is accepted too), or a dataset
--   object with :len() (or __len) and :get(i) returning one sample as a tuple of tensors/numbers
-- @param opts {batch_size = 1, shuffle = false, drop_last = false, generator = dle.Generator}
-- @return DataLoader; #loader is the number of batches per epoch
function DataLoader.new(source, opts)
  opts = check.options(opts, "DataLoader", {"batch_size", "shuffle", "drop_last", "generator"})
  local self = setmetatable({}, DataLoader)
  local bs = opts.batch_size or 1
  if math.type(bs) ~= "integer" or bs < 1 then
    check.error("DataLoader: batch_size must be a positive integer, got " .. tostring(bs))
  end
  self.batch_size, self.shuffle, self.drop_last = bs, opts.shuffle and true or false,
    opts.drop_last and true or false
  self.generator = opts.generator
  if is_tensor(source) then source = {source} end
  if type(source) ~= "table" then
    check.error("DataLoader: expected a list of tensors or a dataset object, got " .. type(source))
  end
  if is_tensor(source[1]) then
    local n = source[1]:dim() > 0 and source[1]:size(1) or 0
    for i, t in ipairs(source) do
      if not is_tensor(t) then check.error(string.format("DataLoader: item %d is not a tensor", i)) end
      if t:dim() == 0 or t:size(1) ~= n then
        check.error(string.format("DataLoader: tensor %d has shape {%s}, tensor 1 has %d rows on dim 1",
          i, table.concat(t:shape(), ","), n))
      end
    end
    self.tensors, self.n = source, n
  elseif type(source.get) == "function" then
    local n
    if type(source.len) == "function" then n = source:len()
    else
      local mt = getmetatable(source)
      if mt and mt.__len then n = #source end
    end
    if math.type(n) ~= "integer" then
      check.error("DataLoader: dataset needs :len() or __len returning an integer")
    end
    self.dataset, self.n = source, n
  else
    check.error("DataLoader: expected a list of tensors or a dataset with :get(i) and :len()")
  end
  self._pos = nil -- next sample position of the running epoch (nil: no epoch running)
  return self
end

setmetatable(DataLoader, {__call = function(_, source, opts) return DataLoader.new(source, opts) end})

--- Number of batches per epoch.
function DataLoader:__len()
  if self.drop_last then return self.n // self.batch_size end
  return (self.n + self.batch_size - 1) // self.batch_size
end

-- Stacks the samples at positions first..first+count-1 of the epoch order from a dataset.
local function dataset_batch(self, first, count)
  local columns, nout = {}, nil
  for k = first, first + count - 1 do
    local i = self._order and self._order[k] or k
    local sample = table.pack(self.dataset:get(i))
    if nout == nil then nout = sample.n
    elseif sample.n ~= nout then
      check.error(string.format("DataLoader: dataset:get(%d) returned %d values, earlier samples %d",
        i, sample.n, nout))
    end
    for c = 1, nout do
      columns[c] = columns[c] or {}
      columns[c][#columns[c] + 1] = sample[c]
    end
  end
  local out = {}
  for c = 1, nout do
    local col = columns[c]
    if type(col[1]) == "number" then
      local all_int = true
      for _, v in ipairs(col) do if math.type(v) ~= "integer" then all_int = false end end
      out[c] = dle.tensor(col, {dtype = all_int and "int64" or "float32"})
    else
      out[c] = dle.stack(col, 1)
    end
  end
  return table.unpack(out, 1, nout)
end

-- Starts an epoch: a fresh permutation when shuffling.
local function start_epoch(self)
  self._pos = 1
  self._perm, self._order = nil, nil
  if self.shuffle and self.n > 0 then
    self._perm = dle.randperm(self.n, {generator = self.generator})
    if self.dataset then self._order = self._perm:totable() end
  end
end

--- Next batch of the running epoch (starting one when none runs), or nil at its end.
-- @return the batch's tensors, one per source tensor / sample value
function DataLoader:next_batch()
  if not self._pos then start_epoch(self) end
  local first = self._pos
  local count = math.min(self.batch_size, self.n - first + 1)
  if count <= 0 or (self.drop_last and count < self.batch_size) then
    self._pos = nil
    return nil
  end
  self._pos = first + count
  if self.dataset then return dataset_batch(self, first, count) end
  local out = {}
  if self._perm then
    local idx = self._perm:narrow(1, first, count)
    for k, t in ipairs(self.tensors) do out[k] = t:index_select(1, idx) end
  else
    for k, t in ipairs(self.tensors) do out[k] = t:narrow(1, first, count) end
  end
  return table.unpack(out, 1, #self.tensors)
end

--- Iterator protocol: `for x, y in loader do` calls loader(nil, nil) first (control nil: a new
-- epoch starts, even if an earlier loop stopped early), then loader(nil, x) until nil.
function DataLoader:__call(_, control)
  if control == nil then self._pos = nil end
  return self:next_batch()
end

--- An explicit iterator over one epoch: `for x, y in loader:iter() do ... end`.
-- @return iterator function
function DataLoader:iter()
  self._pos = nil
  return function() return self:next_batch() end
end

function DataLoader:__tostring()
  return string.format("dle.data.DataLoader(%d samples, batch_size %d, %d batches%s%s)", self.n,
    self.batch_size, #self, self.shuffle and ", shuffled" or "", self.drop_last and ", drop_last" or "")
end

return DataLoader
