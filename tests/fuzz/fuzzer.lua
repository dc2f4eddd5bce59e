--- fuzzer.lua — calls dle's public Lua API with random wrong and edge-case arguments and checks
-- that every call either returns or raises a Lua error whose message is a string naming a
-- function. Used by tests/fuzz/api_fuzz.lua (long runs, under ASan) and tests/fuzz_spec.lua (a
-- short deterministic smoke run in the normal suite).
--
-- Every iteration is independent: its random stream is derived from (seed, iteration), the global
-- state it may change (grad mode, threads, RNG, print options) is reset afterwards, so one
-- iteration replays on its own (`api_fuzz.lua --seed S --only I`). An iteration picks a target
-- (a dle function, a tensor method or metamethod, or a scenario that builds an nn layer, an
-- optimizer, a data loader, a file, ... and then uses it) and calls it inside pcall with values
-- drawn from a pool: tensors of every dtype, 0-dim, 0-size, non-contiguous (transposed, narrowed,
-- expanded) or closed, requiring grad or not, aliased with each other; numbers at the edges
-- (0, -1, nan, inf, huge, fractional); strings; option tables with the option names dle reads and
-- random values; lists of tensors; callbacks that return junk or raise.
local dle = require("dle")
local H = require("helpers")

local M = {}

-- ---------------------------------------------------------------- random stream

--- A xorshift64 stream: r(n) is an integer in 1..n, r() a float in [0, 1).
local function stream(seed)
  local s = (seed * 0x9E3779B97F4A7C15) ~ 0x2545F4914F6CDD1D
  if s == 0 then s = 1 end
  return function(n)
    s = s ~ (s << 13)
    s = s ~ (s >> 7)
    s = s ~ (s << 17)
    local v = (s >> 11)               -- 53 random bits, non-negative
    if n then return v % n + 1 end
    return v / (1 << 53)
  end
end

-- ---------------------------------------------------------------- value pools

local DTYPES = {"float32", "float32", "float32", "float64", "float64", "int64", "int64", "bool",
                "int32", "uint8", "float16", "bfloat16"}
local FLOATS = {float32 = true, float64 = true, float16 = true, bfloat16 = true}

-- Numbers at the edges of what dle accepts: sizes, dims, indices, probabilities, rates.
local NUMBERS = {0, 1, -1, 2, 3, -2, 4, 0.5, -0.5, 1.5, 1e-8, 0.999, 64, 65, -65, 1e300, -1e300,
                 math.huge, -math.huge, 0 / 0, math.maxinteger, math.mininteger, 1 << 40,
                 (1 << 36) - 1, 1 << 34, 1 << 62, -(1 << 40), 2.0, -0.0, 100, 7}

-- Sizes past the SIMD widths, tile sizes and the thresholds of the threaded and blocked kernel
-- paths; one dim of a shape at a time, so tensors stay small.
local LARGE = {8, 9, 16, 17, 31, 33, 64, 65, 127, 257, 1031}

-- Option names that dle's functions read (harvested from lua/dle and bindings/).
local OPTION_KEYS = {"dtype", "device", "requires_grad", "generator", "bias", "stride", "padding",
  "dilation", "groups", "causal", "mask", "scale", "reduction", "ignore_index", "label_smoothing",
  "weight", "pos_weight", "padding_idx", "eps", "momentum", "affine", "track_running_stats",
  "training", "elementwise_affine", "lr", "betas", "weight_decay", "nesterov", "dampening",
  "alpha", "centered", "amsgrad", "lr_decay", "initial_accumulator_value", "warmup", "total",
  "min_lr", "step_size", "gamma", "batch_size", "shuffle", "drop_last", "offset", "atol", "rtol",
  "create_graph", "retain_graph", "grad_outputs", "allow_unused", "keepdim", "dim", "p",
  "count_include_pad", "ceil_mode", "return_indices", "norm_type", "nonlinearity", "mode", "a",
  "set_to_none", "strict", "num_batches_tracked", "dropout", "dropout_p", "mlp_ratio", "ids",
  "path", "name", "threshold", "edgeitems", "precision", "params", "step", "max_norm"}

-- ---------------------------------------------------------------- the fuzzer object

local F = {}
F.__index = F

--- Makes a fuzzer. opts: {seed = integer, tmpdir = writable directory for file scenarios,
-- budget = Lua instructions per call (in thousands), targets = pattern selecting target names}.
function M.new(opts)
  opts = opts or {}
  local self = setmetatable({}, F)
  self.seed = opts.seed or 1
  self.tmpdir = opts.tmpdir or "/tmp"
  self.budget = opts.budget or 20000
  self.stats = {calls = 0, ok = 0, errors = 0, per_target = {}}
  self.problems = {}      -- {kind = ..., target = ..., iter = ..., message = ...}
  self.unnamed = {}       -- message pattern -> {count, example}
  self.targets = M.targets(self, opts.targets)
  self.typed = M.typed_targets(opts.targets)
  self.defaults = {threads = dle.get_num_threads(), memory_limit = dle.get_memory_limit(), print = {}}
  for k, v in pairs(dle.print_options) do self.defaults.print[k] = v end
  self.paths = {}
  for i = 1, 4 do self.paths[i] = string.format("%s/f%d", self.tmpdir, i) end
  return self
end

function F:pick(list) return list[self.r(#list)] end
function F:chance(p) return self.r() < p end

-- A shape for this iteration's tensors: most tensors of a call share it or broadcast with it, so
-- calls get past the shape checks and into the kernels often enough.
function F:fresh_shape()
  local nd = self.r(5) - 1                       -- 0..4 dims
  local s = {}
  for d = 1, nd do s[d] = ({1, 2, 3, 4, 5, 2, 3})[self.r(7)] end
  if nd > 0 and self:chance(0.07) then s[self.r(nd)] = 0 end
  if nd > 0 and self:chance(0.08) then s[self.r(nd)] = self:pick(LARGE) end
  return s
end

function F:shape_variant()
  local base = self.base
  local k = self.r(10)
  local s = {}
  for i, v in ipairs(base) do s[i] = v end
  if k <= 5 then return s end
  if k == 6 and #s > 0 then s[self.r(#s)] = 1; return s end          -- broadcastable
  if k == 7 and #s > 0 then table.remove(s, 1); return s end        -- broadcast (fewer dims)
  if k == 8 and #s > 1 then s[1], s[#s] = s[#s], s[1]; return s end  -- other order
  return self:fresh_shape()
end

-- Values for a tensor of n elements of dtype dt: small numbers, sometimes nan/inf/huge.
function F:values(n, dt)
  local v = {}
  local special = self:chance(0.08)
  for i = 1, n do
    if dt == "bool" then v[i] = self:chance(0.5)
    elseif not FLOATS[dt] then v[i] = self.r(8) - 3               -- -2..5: indices, in and out
    elseif special and self:chance(0.3) then v[i] = self:pick({0 / 0, math.huge, -math.huge, 1e30, -1e30})
    else v[i] = (self.r() - 0.5) * 6 end
  end
  return v
end

-- A tensor: random dtype and shape, layout (contiguous, transposed, narrowed, expanded, selected),
-- maybe requiring grad, maybe closed.
function F:tensor(opts)
  opts = opts or {}
  local dt = opts.dtype or self:pick(DTYPES)
  local shape = opts.shape or self:shape_variant()
  local layout = self.r(8)
  local nd = #shape
  local make = {}
  for i, v in ipairs(shape) do make[i] = v end
  if layout == 2 and nd >= 2 then make[1], make[nd] = make[nd], make[1]   -- then transposed
  elseif layout == 3 and nd >= 1 then make[nd] = make[nd] + 2              -- then narrowed
  elseif layout == 4 and nd >= 1 then make[1] = 1                          -- then expanded
  elseif layout == 5 then table.insert(make, 1, 2) end                     -- then selected
  local n = 1
  for _, v in ipairs(make) do n = n * v end
  local t
  if n == 0 then t = dle.zeros(make, {dtype = dt})
  else
    local values = opts.values and opts.values(n) or self:values(n, dt)
    t = dle.tensor(values, {dtype = dt == "bool" and "bool" or (FLOATS[dt] and "float64" or "int64")})
    t = t:view(make):to(dt)
  end
  local grad = FLOATS[dt] and self:chance(opts.grad or 0.15)
  if grad then t:requires_grad_(true) end
  if layout == 2 and nd >= 2 then t = t:transpose(1, nd)
  elseif layout == 3 and nd >= 1 then t = t:narrow(nd, 2, shape[nd])
  elseif layout == 4 and nd >= 1 then t = t:expand(shape)
  elseif layout == 5 then t = t:select(1, 2) end
  if self:chance(0.01) then getmetatable(t).__close(t) end            -- used after close
  self.made[#self.made + 1] = t
  return t
end

-- Integer index tensors (class targets, gather/index_select indices): values -2..5.
function F:index_tensor()
  return self:tensor({dtype = self:chance(0.85) and "int64" or self:pick(DTYPES)})
end

function F:number()
  if self:chance(0.5) then return self.r(4) end           -- small positive integers: valid sizes
  return self:pick(NUMBERS)
end

function F:string()
  local k = self.r(12)
  if k <= 3 then return self:pick(DTYPES) end
  if k == 4 then return self:pick(self.paths) end
  if k == 5 then return self:pick({"mean", "sum", "none", "fan_in", "fan_out", "relu", "tanh",
                                  "leaky_relu", "linear", "x"}) end
  if k == 6 then return self:pick({"ij,jk->ik", "ii->i", "ij->ji", "bij,bjk->bik", "i,i->", "...",
                                  "ij,jk", "a->aa", "->", ",->", "ab,bc,cd->ad"}) end
  if k == 7 then return self:pick({"cpu", "cuda", "cuda:0", "cuda:x", "cpu:1"}) end
  if k == 8 then return self:pick({"", "float33", "complex64", "\0", string.rep("a", 300)}) end
  if k == 9 then return self.tmpdir .. "/missing/x" end
  return self:pick({"1", "2", "-1", "0x10", "nan", "requires_grad", "grad", "__index"})
end

-- Callbacks for the functions that take functions (no_grad, grad, jvp, gradcheck, Function).
function F:callback()
  return self:pick({
    function(x) return x end,
    function(x) if dle.is_tensor(x) then return x * 2 + 1 end return x end,
    function(x) if dle.is_tensor(x) then return x:sum() end return x end,
    function(x) if dle.is_tensor(x) then return x:exp(), x:sin() end end,
    function() return nil end,
    function() return "junk", {} end,
    function() error("fuzz callback error") end,
    function() error({}) end,                             -- a non-string error object
    function(_, x) return x end,
    function(_, g) return g, g end,
  })
end

function F:options(depth)
  local o = {}
  for _ = 1, self.r(3) do
    o[self:pick(OPTION_KEYS)] = self:value(depth + 1)
  end
  return o
end

function F:value(depth)
  depth = depth or 0
  local k = self.r(100)
  if #self.made > 0 and k <= 12 then                            -- aliasing: an earlier tensor or a view of it
    local t = self:pick(self.made)
    if self:chance(0.3) then
      local ok, v = pcall(function() return t:t() end)
      if ok then return v end
    end
    return t
  end
  if k <= 45 then return self:tensor() end
  if k <= 50 then return self:index_tensor() end
  if k <= 68 then return self:number() end
  if k <= 74 then return self:string() end
  if k <= 77 then return nil end
  if k <= 80 then return self:chance(0.5) end
  if k <= 83 then return self:callback() end
  if k <= 85 then return self:pick({dle.default_generator, dle.Generator(self.r(100)), io.stdout}) end
  if depth >= 2 then return self:number() end
  if k <= 90 then return self:options(depth) end
  if k <= 94 then                                                -- a list of tensors
    local l = {}
    for i = 1, self.r(4) - 1 do l[i] = self:tensor() end
    return l
  end
  if k <= 97 then                                                -- a list of sizes/numbers
    local l = {}
    for i = 1, self.r(5) - 1 do l[i] = self:number() end
    return l
  end
  local l = {}                                                   -- anything nested
  for i = 1, self.r(3) do l[i] = self:value(depth + 1) end
  return l
end

function F:args(n)
  local a = {n = n}
  for i = 1, n do a[i] = self:value(0) end
  -- an options table at the end, half of the time with plausible keys and values
  if self:chance(0.25) then
    a.n = a.n + 1
    a[a.n] = self:options(1)
  end
  return a
end

function F:nargs() return self:pick({0, 1, 1, 2, 2, 2, 3, 3, 4, 5}) end

-- ---------------------------------------------------------------- describing calls (for the log)

local function describe(v, depth)
  depth = depth or 0
  local ty = type(v)
  if dle.is_tensor(v) then
    local ok, s = pcall(function()
      return string.format("T(%s{%s}%s%s)", v:dtype(), table.concat(v:shape(), ","),
        v:is_contiguous() and "" or " nc", v.requires_grad and " rg" or "")
    end)
    return ok and s or "T(closed)"
  end
  if ty == "string" then return string.format("%q", #v > 20 and v:sub(1, 20) .. "..." or v) end
  if ty == "number" then return tostring(v) end
  if ty == "table" then
    if depth > 1 then return "{...}" end
    local parts = {}
    for k, x in pairs(v) do
      if #parts > 6 then parts[#parts + 1] = "..."; break end
      parts[#parts + 1] = (math.type(k) == "integer" and "" or tostring(k) .. "=") .. describe(x, depth + 1)
    end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return tostring(ty == "function" and "fn" or v)
end
M.describe = describe

local function describe_args(a)
  local parts = {}
  for i = 1, a.n do parts[i] = describe(a[i]) end
  return table.concat(parts, ", ")
end

-- ---------------------------------------------------------------- checking one call

-- An error message names a function when, after its "file:line:" position, it starts with a name
-- and a colon ("add: shapes ...", "dle.nn.Linear: ...", "SGD: ...", "exp: a tensor used after it
-- was closed"). Lua's own argument errors ("bad argument #1 to 'f'") do not count: dle's bindings
-- name the function themselves (bindings/lua_errors.c).
local function names_function(msg)
  msg = msg:gsub("^[^\n:]+:%d+: ", "", 1)     -- the position (chunk names have no colon)
  if msg:match("^bad argument") then return false end
  if msg:match("^[%w_%.:]+[ %w_%.:()]*:") then return true end
  if msg:match("^fuzz callback error") then return true end    -- the callback's own error
  return false
end
M.names_function = names_function

local BUDGET_MSG = "fuzz: instruction budget exceeded (a hang?)"

function F:record(kind, target, msg)
  self.problems[#self.problems + 1] = {kind = kind, target = target, iter = self.iter, message = msg,
                                       call = self.current}
end

-- Runs f(...) under pcall with an instruction budget and checks the outcome.
-- backward{create_graph = true} keeps a reference cycle on purpose, as PyTorch does (docs/performance.md,
-- Memory): each leaf's .grad holds a history that holds the leaf. Such calls would flood
-- LeakSanitizer runs with that known cycle, so backward's option tables lose the flag here.
local KEEPS_CYCLE = {["Tensor:backward"] = true, ["dle.backward"] = true}

function F:call(target, f, ...)
  local args = table.pack(...)
  if KEEPS_CYCLE[target] then
    for i = 1, args.n do
      if type(args[i]) == "table" and rawget(args[i], "create_graph") ~= nil then
        rawset(args[i], "create_graph", nil)
      end
    end
  end
  self.current = target .. "(" .. describe_args(args) .. ")"
  if self.log then
    self.log:write(self.iter, " ", self.current, "\n")
    self.log:flush()
  end
  local st = self.stats
  st.calls = st.calls + 1
  local pt = st.per_target[target] or {ok = 0, err = 0}
  st.per_target[target] = pt
  local count = 0
  debug.sethook(function()
    count = count + 1
    if count > self.budget then error(BUDGET_MSG, 0) end
  end, "", 1000)
  local res = table.pack(pcall(f, table.unpack(args, 1, args.n)))
  debug.sethook()
  if res[1] then
    st.ok = st.ok + 1
    pt.ok = pt.ok + 1
    self:touch(res)
    return true, res
  end
  st.errors = st.errors + 1
  pt.err = pt.err + 1
  local msg = res[2]
  if type(msg) ~= "string" then
    -- the one callback that raises a table may see it passed through: that is the caller's object
    if type(msg) ~= "table" then self:record("non-string error", target, describe(msg)) end
  elseif msg == BUDGET_MSG then
    self:record("hang", target, msg)
  elseif not names_function(msg) then
    self:record("unnamed error", target, msg)
    local key = msg:gsub("%d+", "N")
    local u = self.unnamed[key] or {count = 0, example = self.current, iter = self.iter}
    u.count = u.count + 1
    self.unnamed[key] = u
  end
  return false, msg
end

-- Reads what a call returned, so a tensor with wrong metadata (sizes past its storage) shows up
-- under ASan: prints it, copies it to contiguous memory, sums it. An output that requires grad is
-- differentiated: backward through the op's gradient rule with whatever shapes, layouts and dtypes
-- the call had, sometimes twice (create_graph, then the gradient's own backward).
function F:touch(res)
  for i = 2, math.min(res.n, 4) do
    local v = res[i]
    if dle.is_tensor(v) then
      pcall(function()
        if v:numel() <= 4096 then local _ = tostring(v) end
        local c = v:contiguous()
        if c:is_floating_point() then c:sum() end
      end)
      local ok, rg = pcall(function() return v.requires_grad end)
      if ok and rg and self:chance(0.7) then
        local leaves = {}
        for _, t in ipairs(self.made) do
          if pcall(function() return t.requires_grad and t.is_leaf end) and t.requires_grad and t.is_leaf then
            leaves[#leaves + 1] = t
          end
        end
        self:call("backward", function()
          local loss = v:to("float64"):sum()
          if #leaves > 0 and self:chance(0.4) then
            local g = dle.grad(loss, leaves, {create_graph = true, allow_unused = true})
            local total
            for _, gi in pairs(g) do total = total and total + gi:to("float64"):sum() or gi:to("float64"):sum() end
            if total and total.requires_grad then total:backward() end
          else
            loss:backward()
          end
        end)
      end
    end
  end
end

-- ---------------------------------------------------------------- targets

-- Names never called with random arguments: they would read the real data set, change global
-- paths, or are covered by a scenario instead.
local SKIP = {["dle.data.fashion_mnist"] = true, ["dle.data.text_corpus"] = true,
              ["dle.set_printoptions"] = true}

local function sorted_keys(t)
  local k = {}
  for name in pairs(t) do if type(name) == "string" then k[#k + 1] = name end end
  table.sort(k)
  return k
end

--- The list of targets: {name = ..., run = function(fz)}.
function M.targets(_, pattern)
  local list = {}
  local function add(name, run)
    if (not pattern or name:find(pattern)) and not SKIP[name] then list[#list + 1] = {name = name, run = run} end
  end
  -- module functions: random arguments
  local function functions(prefix, tbl)
    for _, name in ipairs(sorted_keys(tbl)) do
      local f = tbl[name]
      if type(f) == "function" then
        add(prefix .. name, function(fz) fz:call(prefix .. name, f, table.unpack(fz:args(fz:nargs()))) end)
      end
    end
  end
  functions("dle.", dle)
  functions("dle.nn.functional.", dle.nn.functional)
  functions("dle.nn.init.", dle.nn.init)
  functions("dle.nn.utils.", dle.nn.utils)
  functions("dle.data.", dle.data)
  functions("dle.autograd.", dle.autograd)
  functions("dle.linalg.", dle.linalg)
  functions("dle.io.", dle.io)
  -- tensor methods: a tensor first, then random arguments
  for _, name in ipairs(sorted_keys(dle.Tensor)) do
    local f = dle.Tensor[name]
    if type(f) == "function" then
      add("Tensor:" .. name, function(fz)
        local self_arg = fz:chance(0.9) and fz:tensor() or fz:value(0)
        local a = fz:args(fz:nargs())
        fz:call("Tensor:" .. name, f, self_arg, table.unpack(a, 1, a.n))
      end)
    end
  end
  -- metamethods: operators, indexing, length, printing, close
  for _, name in ipairs(sorted_keys(dle.metatable)) do
    local f = dle.metatable[name]
    if type(f) == "function" and name ~= "__gc" then
      add("Tensor." .. name, function(fz)
        local a = fz:chance(0.8) and fz:tensor() or fz:value(0)
        local b = fz:chance(0.5) and fz:tensor() or fz:value(0)
        fz:call("Tensor." .. name, f, a, b, fz:value(0))
      end)
    end
  end
  for _, s in ipairs(M.scenarios) do add(s.name, s.run) end
  return list
end

-- ---------------------------------------------------------------- scenarios

M.scenarios = {}
local function scenario(name, run) M.scenarios[#M.scenarios + 1] = {name = name, run = run} end

-- Layer constructor arguments: small sizes mostly, then maybe options.
function F:layer_args()
  local a = {n = 0}
  for _ = 1, self.r(4) - 1 do
    a.n = a.n + 1
    a[a.n] = self:chance(0.8) and self.r(4) or self:value(1)
  end
  if self:chance(0.4) then a.n = a.n + 1; a[a.n] = self:options(1) end
  return a
end

local MODULE_METHODS = {"parameters", "named_parameters", "modules", "train", "eval", "zero_grad",
                        "state_dict", "load_state_dict", "to", "summary", "__repr", "buffers",
                        "named_buffers", "children", "apply", "register_buffer", "requires_grad_"}

-- Every nn class: construct it, call it on random inputs, backward, then random module methods.
for _, cname in ipairs(sorted_keys(dle.nn)) do
  local cls = dle.nn[cname]
  if type(cls) == "table" and cname ~= "functional" and cname ~= "init" and cname ~= "utils" then
    scenario("dle.nn." .. cname, function(fz)
      local name = "dle.nn." .. cname
      local ok, res = fz:call(name, cls, table.unpack(fz:layer_args()))
      local m = ok and res[2]
      if type(m) ~= "table" then return end
      for _ = 1, fz.r(3) do
        local a = fz:args(fz.r(3) - 1)
        if fz:chance(0.7) then a[1] = fz:tensor({grad = 0.5}) ; if a.n == 0 then a.n = 1 end end
        local cok, out = fz:call(name .. ":forward", m, table.unpack(a, 1, a.n))
        if cok and dle.is_tensor(out[2]) and pcall(function() return out[2].requires_grad end)
           and out[2].requires_grad and fz:chance(0.5) then
          fz:call(name .. ":backward", function() out[2]:sum():backward() end)
        end
      end
      for _ = 1, fz.r(3) do
        local meth = fz:pick(MODULE_METHODS)
        local f = m[meth]
        if type(f) == "function" then
          local a = fz:args(fz.r(3) - 1)
          if meth == "load_state_dict" and fz:chance(0.5) then
            local sok, sd = pcall(m.state_dict, m)
            if sok and type(sd) == "table" then
              -- a state dict with one entry replaced by junk or a wrong-shaped tensor
              local keys = sorted_keys(sd)
              if #keys > 0 then sd[fz:pick(keys)] = fz:value(0) end
              a = {sd, n = 1}
            end
          end
          fz:call(name .. ":" .. meth, f, m, table.unpack(a, 1, a.n))
        end
      end
    end)
  end
end

-- Optimizers and schedulers over parameters whose gradients may be missing, of the wrong shape
-- or dtype.
for _, oname in ipairs({"SGD", "Adam", "AdamW", "Adagrad", "RMSprop"}) do
  scenario("dle.optim." .. oname, function(fz)
    local name = "dle.optim." .. oname
    local params = {}
    for i = 1, fz.r(3) do
      local p = fz:chance(0.9) and fz:tensor({grad = 0.9}) or fz:value(0)
      params[i] = p
      if dle.is_tensor(p) and fz:chance(0.8) then
        pcall(function() p.grad = fz:chance(0.8) and dle.randn(p:shape(), {dtype = p:dtype()}) or fz:tensor() end)
      end
    end
    local popts = fz:chance(0.5) and {lr = fz:pick({0.1, 0.01, -1, 0 / 0, 1e300})} or fz:options(1)
    if fz:chance(0.3) then
      popts[fz:pick({"momentum", "betas", "weight_decay", "eps", "nesterov", "alpha", "centered",
                     "amsgrad", "lr_decay", "dampening"})] = fz:value(1)
    end
    local plist = fz:chance(0.9) and params or {{params = params, lr = fz:value(1)}}
    local ok, res = fz:call(name, dle.optim[oname], plist, popts)
    if not ok then return end
    local opt = res[2]
    for _ = 1, fz.r(4) do
      local k = fz.r(7)
      if k <= 3 then fz:call(name .. ":step", opt.step, opt)
      elseif k == 4 then fz:call(name .. ":zero_grad", opt.zero_grad, opt, fz:value(1))
      elseif k == 5 then fz:call(name .. ".lr=", function(v) opt.lr = v end, fz:value(1))
      elseif k == 6 then
        local sok, sd = pcall(opt.state_dict, opt)
        if sok and fz:chance(0.7) then
          -- mutate one level of the state dict
          local keys = sorted_keys(sd)
          if #keys > 0 then sd[fz:pick(keys)] = fz:value(1) end
        else sd = fz:value(0) end
        fz:call(name .. ":load_state_dict", opt.load_state_dict, opt, sd)
      else
        local sched = fz:pick({"cosine", "step"})
        local sok, sres = fz:call("dle.optim.lr." .. sched, dle.optim.lr[sched], opt, fz:options(1))
        if sok and type(sres[2]) == "table" then
          for _ = 1, fz.r(3) do fz:call("dle.optim.lr." .. sched .. ":step", sres[2].step, sres[2]) end
        end
      end
    end
  end)
end

-- DataLoader over random tensors or junk, iterated a few batches.
scenario("dle.data.DataLoader", function(fz)
  local src
  if fz:chance(0.7) then
    src = {}
    for i = 1, fz.r(3) do src[i] = fz:tensor() end
  else src = fz:value(0) end
  local o = fz:chance(0.6) and {batch_size = fz:number(), shuffle = fz:chance(0.5), drop_last = fz:chance(0.5)}
            or fz:options(1)
  local ok, res = fz:call("dle.data.DataLoader", dle.data.DataLoader, src, o)
  if not ok then return end
  local loader = res[2]
  fz:call("dle.data.DataLoader:iterate", function()
    local n = 0
    for _ in loader do
      n = n + 1
      if n >= 5 then break end
    end
    return #loader
  end)
end)

-- File scenarios: save a random value, then load it back whole, truncated, or with random bytes
-- written over it; memory maps and IDX files with headers that do not match their data.
local SAVERS = {{"dle.save", "dle.load"}, {"dle.save_npy", "dle.load_npy"},
                {"dle.save_safetensors", "dle.load_safetensors"}}

local write_file, read_file = H.write_file, H.read_file

local function fn_of(dotted)
  local f = dle
  for part in dotted:gmatch("[^.]+") do if part ~= "dle" then f = f[part] end end
  return f
end

function F:mangle(path)
  local s = read_file(path)
  if not s or #s == 0 then return end
  local k = self.r(3)
  if k == 1 then s = s:sub(1, self.r(#s) - 1)                       -- truncated
  elseif k == 2 then                                                 -- bytes flipped
    local b = {s:byte(1, -1)}
    for _ = 1, self.r(8) do
      local i = self.r(#b)
      b[i] = self.r(256) - 1
    end
    local parts = {}
    for i = 1, #b, 4096 do parts[#parts + 1] = string.char(table.unpack(b, i, math.min(i + 4095, #b))) end
    s = table.concat(parts)
  else s = s .. string.rep("\0", self.r(100)) end                   -- trailing junk
  write_file(path, s)
end

scenario("dle.io", function(fz)
  local pair = fz:pick(SAVERS)
  local path = fz:pick(fz.paths)
  local v
  if pair[1] == "dle.save_npy" then v = fz:chance(0.8) and fz:tensor({grad = 0}) or fz:value(0)
  elseif pair[1] == "dle.save_safetensors" then
    v = {}
    for i = 1, fz.r(3) do v[fz:pick({"a", "b", "w.1", tostring(i)})] = fz:tensor({grad = 0}) end
    if fz:chance(0.2) then v = fz:value(0) end
  else v = fz:value(0) end
  local ok = fz:call(pair[1], fn_of(pair[1]), path, v)
  if ok and fz:chance(0.7) then fz:mangle(path) end
  fz:call(pair[2], fn_of(pair[2]), fz:chance(0.9) and path or fz:value(0))
end)

-- IDX header: magic (0, 0, type, ndim), then ndim big-endian u32 sizes, then data.
scenario("dle.data.idx", function(fz)
  local path = fz:pick(fz.paths)
  local ndim = fz.r(5) - 1
  local ty = fz:pick({0x08, 0x09, 0x0B, 0x0C, 0x0D, 0x0E, 0x07})
  local parts = {string.char(0, 0, ty, ndim)}
  local n = 1
  for _ = 1, ndim do
    local d = fz:pick({0, 1, 2, 3, 5, 0x7fffffff, 0xffffffff, 1 << 20})
    n = n * d
    parts[#parts + 1] = string.pack(">I4", d)
  end
  if n < 0 or n > 64 then n = 64 end   -- (the product may have wrapped around)
  local bytes = n * fz:pick({1, 2, 4, 8}) + fz.r(4) - 2
  if bytes > 0 then parts[#parts + 1] = string.rep("\1", bytes) end
  if fz:chance(0.2) then parts = {string.rep("\0", fz.r(6) - 1)} end
  write_file(path, table.concat(parts))
  fz:call("dle.data.idx", dle.data.idx, path)
end)

scenario("dle.data.memmap", function(fz)
  local path = fz:pick(fz.paths)
  write_file(path, string.rep("\7", fz.r(40) - 1))
  local shape = fz:chance(0.7) and fz:fresh_shape() or fz:value(1)
  local o = fz:chance(0.5) and {offset = fz:number()} or nil
  local ok, res = fz:call("dle.data.memmap", dle.data.memmap, path, fz:chance(0.8) and fz:pick(DTYPES) or fz:value(1),
                          shape, o)
  if ok and dle.is_tensor(res[2]) then fz:call("memmap:clone", res[2].clone, res[2]) end
end)

scenario("dle.data.text_corpus", function(fz)
  local path = fz:pick(fz.paths)
  write_file(path, fz:chance(0.8) and "abcab\nba" or "")
  local ok, res = fz:call("dle.data.text_corpus", dle.data.text_corpus, fz:chance(0.7) and {path = path} or fz:value(1))
  if not ok then return end
  local c = res[2]
  local k = fz.r(3)
  if k == 1 then fz:call("TextCorpus:batch", c.batch, c, fz:number(), fz:number(), fz:chance(0.5) and fz:options(1)
                         or nil)
  elseif k == 2 then fz:call("TextCorpus:encode", c.encode, c, fz:chance(0.5) and "abc" or fz:value(0))
  else fz:call("TextCorpus:decode", c.decode, c, fz:value(0)) end
end)

scenario("dle.data.fashion_mnist", function(fz)
  -- junk splits and an empty directory only: the real files are 50 MB
  fz:call("dle.data.fashion_mnist", dle.data.fashion_mnist, fz:pick({"x", 3, "valid"}), {path = fz.tmpdir})
  fz:call("dle.data.fashion_mnist", dle.data.fashion_mnist, "test", {path = fz.tmpdir .. "/missing"})
end)

-- Generator methods, and states with junk or extreme seeds and offsets.
scenario("dle.Generator", function(fz)
  local g = fz:chance(0.8) and dle.Generator(fz.r(100)) or dle.default_generator
  local meths = getmetatable(g).__index
  local name = fz:pick({"manual_seed", "initial_seed", "get_state", "set_state"})
  local a = fz:args(fz.r(3) - 1)
  if name == "set_state" and fz:chance(0.6) then
    local s = g:get_state()
    s[fz:pick({"seed", "offset"})] = fz:pick({-1, 0, math.maxinteger, math.mininteger, 1.5, 0 / 0, "x", {}})
    a = {s, n = 1}
  end
  fz:call("Generator:" .. name, meths[name], fz:chance(0.9) and g or fz:value(0), table.unpack(a, 1, a.n))
  fz:call("dle.rand", dle.rand, 3, {generator = g})
end)

scenario("dle.set_printoptions", function(fz)
  fz:call("dle.set_printoptions", dle.set_printoptions, fz:options(1))
  fz:call("tostring", tostring, fz:tensor())
end)

-- Autograd: backward and grad on graphs built from random ops, custom Functions with junk results.
scenario("autograd", function(fz)
  local x = fz:tensor({dtype = fz:pick({"float32", "float64"}), grad = 0.9})
  local ok, res = fz:call("autograd:build", function()
    local y = x
    for _ = 1, fz.r(3) do
      y = fz:pick({function(t) return t * t end, function(t) return t:exp() end, function(t) return t:sum() end,
                   function(t) return t:t() end, function(t) return t:relu() end,
                   function(t) return t:softmax(-1) end, function(t) return t:mean() end})(y)
    end
    return y
  end)
  if not ok then return end
  local y = res[2]
  local k = fz.r(4)
  if k == 1 then fz:call("Tensor:backward", y.backward, y, fz:value(0))
  elseif k == 2 then fz:call("dle.grad", dle.grad, y, fz:chance(0.7) and {x} or fz:value(0), fz:options(1))
  elseif k == 3 then fz:call("dle.grad", dle.grad, {y, y}, {x, x},
                             {create_graph = fz:chance(0.5), grad_outputs = fz:value(0)})
  else
    local Fn = dle.autograd.Function({forward = fz:callback(), backward = fz:callback()})
    local cok, out = fz:call("autograd.Function", Fn, x, fz:value(0))
    if cok and dle.is_tensor(out[2]) then
      fz:call("autograd.Function:backward", function() out[2]:sum():backward() end)
    end
  end
end)

-- Mixed precision: a random op chain under dle.autocast (and its backward), and a GradScaler
-- driven through its methods in random order with junk arguments now and then.
scenario("dle.autocast", function(fz)
  local x = fz:tensor({dtype = fz:pick({"float32", "float16", "bfloat16", "float64"}), grad = 0.5})
  local w = fz:tensor({grad = 0.5})
  local dtype = fz:chance(0.9) and fz:pick({"bfloat16", "float16"}) or fz:value(0)
  local ok, res = fz:call("dle.autocast", dle.autocast, dtype, function()
    local y = fz:pick({function() return x:matmul(w) end, function() return (x * w):softmax(-1) end,
                       function() return x:exp():sum() end, function() return dle.nn.functional.relu(x) + w end})()
    if fz:chance(0.5) then y:sum():backward() end
    return y
  end)
  if ok and dle.is_tensor(res[2]) and fz:chance(0.3) then
    fz:call("Tensor:backward", res[2].backward, res[2], fz:value(0))
  end
end)

scenario("dle.amp.GradScaler", function(fz)
  local ok, res = fz:call("dle.amp.GradScaler", dle.amp.GradScaler, fz:chance(0.7) and {} or fz:options(1))
  if not ok then return end
  local scaler = res[2]
  local p = dle.randn(fz.r(3), fz.r(3)):requires_grad_()   -- a live parameter: the scaler is fuzzed
  pcall(function() p.grad = fz:chance(0.8) and dle.randn(p:shape()) * fz:pick({1, 1e38, 0 / 0}) or fz:tensor() end)
  local opt = dle.optim.SGD({p}, {lr = 0.1})
  for _ = 1, fz.r(5) do
    local meth = fz:pick({"scale", "unscale_", "step", "update", "get_scale", "state_dict", "load_state_dict"})
    local arg = ({scale = p, unscale_ = opt, step = opt, update = nil, load_state_dict = scaler:state_dict()})[meth]
    if fz:chance(0.2) then arg = fz:value(0) end
    fz:call("GradScaler:" .. meth, scaler[meth], fz:chance(0.95) and scaler or fz:value(0), arg)
  end
end)

-- ---------------------------------------------------------------- typed targets

local SIGNATURES = require("fuzz.signatures")
local FLOAT_DTYPES = {"float32", "float32", "float32", "float64", "float64", "float16", "bfloat16"}
local EINSUM = {"ij,jk->ik", "bij,bjk->bik", "ij->ji", "ii->i", "ii->", "ij,jk", "i,i->", "ij,ij->ij",
                "bij,bkj->bik", "ij,kj->ik", "...ij,...jk->...ik", "ij->", "ik,kj->ij", "iij->j"}

-- Values of the options that signatures name, given the call's sizes.
local OPTION_VALUES = {
  stride = function(fz) return fz:chance(0.8) and fz.r(3) or fz:pick({0, -1, {1, 2}, {2}, 1 << 40}) end,
  padding = function(fz) return fz:chance(0.8) and fz.r(3) - 1 or fz:pick({-1, {1, 0}, {0}, 1 << 40, 9}) end,
  dilation = function(fz) return fz:chance(0.8) and fz.r(2) or fz:pick({0, -1, {2, 1}, 1 << 40}) end,
  groups = function(fz) return fz:chance(0.7) and fz.r(2) or fz:pick({0, -1, 3, 1 << 40}) end,
  count_include_pad = function(fz) return fz:chance(0.5) end,
  lr = function(fz) return fz:pick({0.1, 0.01, 0, -1, 0 / 0, 1e300}) end,
  step = function(fz) return fz:pick({1, 2, 0, -1, 1 << 40, math.maxinteger}) end,
  momentum_buffer = function(fz, dims) return fz:tensor({shape = {dims.N, fz:chance(0.8) and dims.C
                                                                  or dims.C + 1}}) end,
  grad_avg = function(fz, dims) return fz:tensor({shape = {dims.N, fz:chance(0.8) and dims.C or dims.C + 1}}) end,
  max_exp_avg_sq = function(fz, dims) return fz:tensor({shape = {dims.N, fz:chance(0.8) and dims.C or dims.C + 1}}) end,
  reduction = function(fz) return fz:pick({"mean", "sum", "none", "mean", "max"}) end,
  ignore_index = function(fz, dims) return fz:pick({1, dims.C, -100, 0, dims.C + 1}) end,
  label_smoothing = function(fz) return fz:pick({0, 0.1, 0.5, 1, -0.1, 1.5, 0 / 0}) end,
  weight = function(fz, dims) return fz:tensor({shape = {fz:chance(0.8) and dims.C or dims.C + 1},
                                                dtype = fz:pick(FLOAT_DTYPES)}) end,
  pos_weight = function(fz, dims) return fz:chance(0.7) and fz:tensor({shape = {dims.C},
      dtype = fz:pick(FLOAT_DTYPES)}) or fz:pick({2, -1, 0 / 0}) end,
  padding_idx = function(fz, dims) return fz:pick({1, dims.V, 0, -1, dims.V + 1}) end,
  generator = function(fz) return fz:chance(0.8) and dle.Generator(fz.r(100)) or fz:value(1) end,
  mask = function(fz, dims) return fz:tensor({shape = fz:chance(0.8) and {dims.S, dims.P} or {dims.P, dims.S},
                                              dtype = fz:pick({"bool", "float32", "bool"})}) end,
  causal = function(fz) return fz:chance(0.5) end,
  scale = function(fz) return fz:pick({0.5, 1, 0, -1, 0 / 0, math.huge}) end,
  dtype = function(fz) return fz:pick(DTYPES) end,
  requires_grad = function(fz) return fz:chance(0.5) end,
  out = function(fz, dims) return fz:tensor({shape = {dims.N, dims.P}, dtype = fz:pick(FLOAT_DTYPES)}) end,
}

-- The sizes of one call, by letter.
function F:dims()
  local d = {}
  for c in ("NCHWOKMPBSEV"):gmatch(".") do d[c] = self:chance(0.03) and 0 or self.r(5) end
  d.K = math.min(d.K, 3)
  if self:chance(0.15) then d[self:pick({"N", "C", "H", "W", "M", "P", "S", "E", "V"})] = self:pick(LARGE) end
  return d
end

local function shape_of(inner, dims)
  local s = {}
  for part in inner:gmatch("[^,]+") do s[#s + 1] = math.tointeger(tonumber(part)) or dims[part] end
  return s
end

-- Integer indices 1..hi, one sometimes out of range.
function F:indices(shape, hi)
  local bad = self:chance(0.1)
  return self:tensor({shape = shape, dtype = self:chance(0.95) and "int64" or self:pick(DTYPES), grad = 0,
    values = function(n)
      local v = {}
      for i = 1, n do v[i] = hi > 0 and self.r(hi) or 1 end
      if bad then v[self.r(n)] = self:pick({0, -1, hi + 1, -hi - 1, 1 << 40, math.mininteger}) end
      return v
    end})
end

function F:typed_arg(spec, dims, first)
  if spec:sub(-1) == "?" then
    spec = spec:sub(1, -2)
    if self:chance(0.3) then return nil end
  end
  local kind, inner, rest = spec:match("^(%a)%[([^%]]*)%](.*)$")
  if kind == "T" then
    return self:tensor({shape = shape_of(inner, dims), dtype = self:chance(0.9) and self:pick(FLOAT_DTYPES) or nil})
  elseif kind == "I" then return self:indices(shape_of(inner, dims), dims[rest:match(":(%a)")] or 3)
  elseif kind == "B" then return self:tensor({shape = shape_of(inner, dims), dtype = "bool"})
  elseif kind == "s" then return shape_of(inner, dims)
  elseif kind == "L" then
    local l, shape = {}, shape_of(inner, dims)
    local dt = self:pick(FLOAT_DTYPES)
    for i = 1, self.r(3) do l[i] = self:tensor({shape = shape, dtype = self:chance(0.9) and dt or nil}) end
    return l
  end
  local okind, keys = spec:match("^(O){(.*)}$")
  if okind then
    local o = {}
    for key in keys:gmatch("[^,]+") do
      if self:chance(0.5) then
        local gen = OPTION_VALUES[key]
        o[key] = gen and gen(self, dims) or self:value(1)
      end
    end
    return o
  end
  local ok, nd = pcall(function() return first:dim() end)   -- first may be junk or closed
  if not ok then nd = 2 end
  if spec == "d" then
    if self:chance(0.85) and nd > 0 then
      local d = self.r(nd)
      return self:chance(0.3) and d - nd - 1 or d
    end
    return self:pick({0, nd + 1, -nd - 1, 65, -65, 1 << 40})
  elseif spec == "n" then return self:chance(0.85) and self.r(5) - 1
      or self:pick({-1, 1 << 36, 1 << 62, math.maxinteger, 0})
  elseif spec:match("^n:") then return self:chance(0.9) and dims[spec:sub(3)]
      or self:pick({0, -1, dims[spec:sub(3)] + 1})
  elseif spec == "x" then return self:pick({0.5, 1, 0, -1, 2, 1e-5, 0.1, 3, -2.5, 0 / 0, math.huge, 1e300})
  elseif spec == "b" then return self:chance(0.5)
  elseif spec == "e" then return self:pick(EINSUM) end
  error("fuzzer: bad signature argument " .. spec)
end

-- Builds a signature's arguments, then sometimes breaks one or two: junk in place of an argument,
-- an argument replaced by another one (aliasing) or by a view of it, a tensor made non-contiguous.
function F:typed_args(sig)
  local dims = self:dims()
  local a, n = {}, 0
  for spec in sig:gmatch("%S+") do
    n = n + 1
    a[n] = self:typed_arg(spec, dims, a[1])
  end
  a.n = n
  if n > 0 and self:chance(0.5) then
    for _ = 1, self.r(2) do
      local i, k = self.r(n), self.r(4)
      if k == 1 then a[i] = self:value(0)
      elseif k == 2 then a[i] = a[self.r(n)]
      elseif k == 3 and dle.is_tensor(a[i]) then
        local t = a[i]
        pcall(function() a[i] = t:dim() >= 2 and t:transpose(1, 2) or t:unsqueeze(1) end)
      else a[i] = self:typed_arg(sig:match(string.rep("%S+%s+", i - 1) .. "(%S+)"), self:dims(), a[1]) end
    end
  end
  return a
end

-- Calls f(args) inside dle.jvp with random tangents for its float tensor arguments, so the op's
-- forward-mode rule runs on the fuzzed shapes, layouts and dtypes.
function F:forward_mode(label, f, a)
  local pos, ins, tans = {}, {}, {}
  for i = 1, a.n do
    local t = a[i]
    local ok, tan = pcall(function()
      if not (dle.is_tensor(t) and t:is_floating_point()) then return nil end
      return dle.randn(t:shape(), {dtype = t:dtype()})
    end)
    if ok and tan then pos[#pos + 1], ins[#ins + 1], tans[#tans + 1] = i, t, tan end
  end
  if #ins == 0 then return self:call(label, f, table.unpack(a, 1, a.n)) end
  self:call(label .. " (jvp)", dle.jvp, function(...)
    local b, primals = table.pack(table.unpack(a, 1, a.n)), {...}
    for k, i in ipairs(pos) do b[i] = primals[k] end
    return f(table.unpack(b, 1, b.n))
  end, ins, tans)
end

function M.typed_targets(pattern)
  local list = {}
  local names = sorted_keys(SIGNATURES)
  for _, name in ipairs(names) do
    local f = dle[name] or dle.Tensor[name] or dle.core[name]
    local label = (dle[name] and "dle." or dle.Tensor[name] and "Tensor:" or "dle.core.") .. name
    if f and (not pattern or label:find(pattern)) then
      list[#list + 1] = {name = label .. " (typed)", run = function(fz)
        local a = fz:typed_args(fz:pick(SIGNATURES[name]))
        if fz:chance(0.15) then fz:forward_mode(label, f, a)
        else fz:call(label, f, table.unpack(a, 1, a.n)) end
      end}
    end
  end
  return list
end

-- ---------------------------------------------------------------- running

-- Random strings reach the file functions as paths: while the fuzzer runs, Lua's io.open (which
-- dle.save and friends write through), os.rename and os.remove may only change files under
-- tmpdir. Returns a function that restores them.
function F:sandbox()
  local open, rename, remove = io.open, os.rename, os.remove
  local prefix = self.tmpdir .. "/"
  local function inside(path) return type(path) == "string" and path:sub(1, #prefix) == prefix end
  io.open = function(path, mode)
    if mode and mode:find("[wa+]") and not inside(path) then
      return nil, "fuzz sandbox: no writes outside " .. self.tmpdir, 13
    end
    return open(path, mode)
  end
  os.rename = function(a, b)
    if not (inside(a) and inside(b)) then return nil, "fuzz sandbox: no renames outside " .. self.tmpdir, 13 end
    return rename(a, b)
  end
  os.remove = function(path)
    if not inside(path) then return nil, "fuzz sandbox: no removes outside " .. self.tmpdir, 13 end
    return remove(path)
  end
  return function() io.open, os.rename, os.remove = open, rename, remove end
end

-- Restores the global state a call may have changed.
function F:reset()
  dle.set_grad_enabled(true)
  dle.set_num_threads(self.defaults.threads)
  dle.set_memory_limit(self.defaults.memory_limit)
  for k, v in pairs(self.defaults.print) do dle.print_options[k] = v end
end

--- Runs iteration i (deterministic for (seed, i)).
function F:iteration(i)
  self.iter = i
  self.r = stream(self.seed * 1000003 + i)
  self.made = {}
  self.base = self:fresh_shape()
  dle.manual_seed(i)
  local target
  if #self.typed > 0 and (#self.targets == 0 or self:chance(0.5)) then target = self:pick(self.typed)
  else target = self:pick(self.targets) end
  local ok, err = pcall(target.run, self)
  debug.sethook()
  if not ok then
    -- the scenario code itself failed outside fz:call: a fuzzer bug, or an error escaping dle
    if type(err) == "string" and err == BUDGET_MSG then self:record("hang", target.name, err)
    else self:record("scenario error", target.name, tostring(err)) end
  end
  self:reset()
  self.made = nil
end

--- Runs iterations first..last, stopping early after `seconds` when given.
function F:run(first, last, seconds)
  local t0 = os.clock()
  local restore = self:sandbox()
  local done = last
  for i = first, last do
    self:iteration(i)
    if i % 64 == 0 then collectgarbage() end
    if seconds and os.clock() - t0 > seconds then done = i; break end
  end
  restore()
  return done
end

return M
