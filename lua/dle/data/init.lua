--- dle.data: data sets and loading — IDX files (raw or gzip), Fashion-MNIST, file memory maps,
-- byte-level text corpora and the DataLoader. The file parsing and mapping are C helpers in
-- dle.core (bindings/lua_data.c); everything else is plain Lua over tensor ops.
local dle = require("dle")
local check = require("dle.check")
local core = require("dle.core")

local data = {}

-- Calls a dle.core helper; its errors are re-raised at the caller's caller (level 3), without the
-- position of this file, so messages point at the user's line.
local function native(fn, ...)
  local res = table.pack(pcall(fn, ...))
  if not res[1] then
    local msg = tostring(res[2]):gsub("^[^\n]-%.lua:%d+: ", "", 1)
    error(msg, 3)
  end
  return table.unpack(res, 2, res.n)
end

data.DataLoader = require("dle.data.data_loader")
data.TextCorpus = require("dle.data.text_corpus")

--- Reads an IDX file (the MNIST format), gzip-compressed or raw, into a tensor.
-- Element types keep their dtype: uint8, int8, int16, int32, float32,
-- float64 (as torchvision reads them). Errors name the path and the problem (bad magic, truncated,
-- extra data).
-- @param path string
-- @return tensor with the file's shape
function data.idx(path)
  if type(path) ~= "string" then
    error("idx: path must be a string, got " .. type(path), 2)
  end
  return (native(core._read_idx, path))
end

local function file_exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

local FASHION_PACKAGE = "dataset-fashion-mnist"
local FASHION_DIR = "/usr/share/datasets/fashion-mnist"

--- Loads a Fashion-MNIST split.
-- Looks in opts.path only when given, else in $DLE_DATA, then /usr/share/datasets/fashion-mnist (Debian package
-- dataset-fashion-mnist) for {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz].
-- @param split "train" (60000 images) or "test" (10000)
-- @param opts {path = directory, dtype = "float32"} (dtype of the images; any float dtype)
-- @return images (N x 1 x 28 x 28, values in [0,1]), labels (int64 N, classes 1..10)
function data.fashion_mnist(split, opts)
  opts = check.table(opts, "fashion_mnist", "options", true) or {}
  split = split or "train"
  local prefix = ({train = "train", test = "t10k"})[split]
  if not prefix then
    error(string.format('fashion_mnist: split must be "train" or "test", got %s', tostring(split)), 2)
  end
  -- An explicit path is the only place looked at; otherwise $DLE_DATA, then the Debian package.
  local dirs = {}
  if opts.path then dirs[1] = opts.path
  else
    local env = os.getenv("DLE_DATA")
    if env and env ~= "" then dirs[#dirs + 1] = env end
    dirs[#dirs + 1] = FASHION_DIR
  end
  local tried = {}
  local images_path, labels_path
  for _, dir in ipairs(dirs) do
    for _, ext in ipairs({".gz", ""}) do
      local ip = dir .. "/" .. prefix .. "-images-idx3-ubyte" .. ext
      local lp = dir .. "/" .. prefix .. "-labels-idx1-ubyte" .. ext
      if file_exists(ip) and file_exists(lp) then
        images_path, labels_path = ip, lp
        break
      end
      tried[#tried + 1] = ip
    end
    if images_path then break end
  end
  if not images_path then
    error(string.format("fashion_mnist: %s files not found (install the Debian package %s, or set "
      .. "DLE_DATA or opts.path to a directory holding them); tried: %s",
      split, FASHION_PACKAGE, table.concat(tried, ", ")), 2)
  end
  local raw = native(core._read_idx, images_path)
  local labels8 = native(core._read_idx, labels_path)
  if raw:dtype() ~= "uint8" or raw:dim() ~= 3 then
    error(string.format("fashion_mnist: %s holds a %s tensor of %d dims, expected uint8 N x 28 x 28",
      images_path, raw:dtype(), raw:dim()), 2)
  end
  if labels8:dim() ~= 1 or labels8:size(1) ~= raw:size(1) then
    error(string.format("fashion_mnist: %s has %d labels for %d images in %s",
      labels_path, labels8:numel(), raw:size(1), images_path), 2)
  end
  local n, h, w = raw:size(1), raw:size(2), raw:size(3)
  local images = raw:to(opts.dtype or "float32"):div_(255):view(n, 1, h, w)
  local labels = labels8:long():add_(1)
  return images, labels
end

--- Maps a file into memory as a tensor, without reading it.
-- mode "r" (default): the file is opened read-only and mapped copy-on-write (MAP_PRIVATE), so
-- writing into the tensor is allowed, never crashes, and never reaches the file. mode "r+": the
-- mapping is shared and writes go to the file. The file must hold offset + numel * element size
-- bytes. The mapping lives as long as any view of the tensor.
-- @param path string
-- @param dtype dtype name ("float32", "uint8", ...)
-- @param shape table of sizes or a number; nil maps the whole file (after offset) as 1-D
-- @param opts {offset = bytes (a multiple of the element size, default 0), mode = "r" | "r+"}
-- @return tensor
function data.memmap(path, dtype, shape, opts)
  opts = check.table(opts, "memmap", "options", true) or {}
  if type(path) ~= "string" then error("memmap: path must be a string, got " .. type(path), 2) end
  if type(dtype) ~= "string" then error("memmap: dtype must be a string, got " .. type(dtype), 2) end
  local offset = opts.offset or 0
  if math.type(offset) ~= "integer" or offset < 0 then
    error("memmap: offset must be a non-negative integer, got " .. tostring(offset), 2)
  end
  local mode = opts.mode or "r"
  if mode ~= "r" and mode ~= "r+" then
    error(string.format('memmap: mode must be "r" or "r+", got %s', tostring(mode)), 2)
  end
  if shape == nil then
    local f, err = io.open(path, "rb")
    if not f then error("memmap: cannot open " .. tostring(err), 2) end
    local size = f:seek("end")
    f:close()
    local esz = dle.empty(0, {dtype = dtype}):element_size()
    shape = {math.max(0, size - offset) // esz}
  elseif type(shape) == "number" then
    shape = {shape}
  elseif type(shape) ~= "table" then
    error("memmap: shape must be a table of sizes, got " .. type(shape), 2)
  end
  return (native(core._memmap, path, dtype, shape, offset, mode == "r+"))
end

--- A byte-level text corpus for character language models (see dle.data.TextCorpus).
-- @param spec a name ("kjv": the King James Bible from the Debian package bible-kjv, generated
--   once into $DLE_CACHE or ~/.cache/dle), or {path = file} / {name = "kjv", cache = dir}
-- @return a TextCorpus (data, ids, vocab, encode, decode, batch)
function data.text_corpus(spec)
  local ok, res = pcall(data.TextCorpus.new, spec)
  if not ok then error(res, 2) end
  return res
end

--- A dataset over tensors sharing dim 1: :len() and :get(i) returning the i-th slices.
-- @param ... tensors
-- @return dataset object
function data.TensorDataset(...)
  local tensors = table.pack(...)
  if tensors.n == 0 then error("TensorDataset: needs at least one tensor", 2) end
  for i = 1, tensors.n do
    local t = tensors[i]
    if not dle.is_tensor(t) or t:dim() == 0 then
      error(string.format("TensorDataset: argument %d must be a tensor of at least 1 dim, got %s", i,
        dle.is_tensor(t) and "a 0-dim tensor" or check.typename(t)), 2)
    end
  end
  local n = tensors[1]:size(1)
  for i, t in ipairs(tensors) do
    if t:size(1) ~= n then
      error(string.format("TensorDataset: tensor %d has %d rows, tensor 1 has %d", i, t:size(1), n), 2)
    end
  end
  return {
    tensors = tensors,
    len = function() return n end,
    get = function(_, i)
      local out = {}
      for k, t in ipairs(tensors) do out[k] = t:select(1, i) end
      return table.unpack(out)
    end,
  }
end

return data
