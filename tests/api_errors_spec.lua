-- api_errors_spec.lua — every error a user can cause names the dle function, whatever the call
-- path, and is reported at the user's line. The walk (tests/api_walk.lua) calls every public
-- function, constructor and tensor method with wrong values in each position; the rest of this
-- file checks the exact text of the errors issue 18 found.
local dle = require("dle")
local W = require("api_walk")
local H = require("helpers")

local this_file = debug.getinfo(1, "S").short_src

-- Single wrong arguments a function legitimately accepts (a walk with one wrong value as the only
-- argument must otherwise raise an error). Keys are walk labels; values the accepted kinds.
local NO_ARGS = "takes no arguments: extra ones are ignored, as by any Lua function"
local accepted = {}
local function allow(kinds, why, labels)
  for _, l in ipairs(labels) do accepted[l] = {kinds = kinds, why = why} end
end
allow({"nil", "string", "table", "boolean"}, NO_ARGS, {
  "dle.cuda_available", "dle.empty_cache", "dle.get_autocast_dtype", "dle.get_num_threads",
  "dle.get_rng_state", "dle.initial_seed", "dle.is_autocast_enabled", "dle.is_grad_enabled",
  "dle.memory_allocated", "dle.memory_peak", "dle.memory_stats", "dle.op_table",
  "dle.reset_peak_memory_stats", "dle.seed", "dle.time", "dle.get_memory_limit", "dle.nn.GELU",
  "dle.nn.Identity", "dle.nn.ReLU", "dle.nn.SiLU", "dle.nn.Sigmoid", "dle.nn.Tanh",
  "dle.nn.Module", "dle.graph.new", "dle.nn.SELU", "dle.nn.Softsign", "dle.nn.Mish", "dle.nn.Hardswish",
  "dle.nn.Hardsigmoid", "dle.nn.ReLU6", "dle.nn.LogSigmoid", "dle.nn.Tanhshrink"})
allow({"nil", "string", "table", "boolean"}, "a predicate: any value is a valid question",
      {"dle.is_tensor", "dle.is_generator", "dle.rewrite.is_rule", "dle.is_quantized"})
allow({"nil", "table"}, "sizes are optional (nil: a 0-dim tensor) and may be a table",
      {"dle.empty", "dle.zeros", "dle.ones", "dle.rand", "dle.randn"})
allow({"nil", "table"}, "an optional options table",
      {"dle.nn.BCEWithLogitsLoss", "dle.nn.CrossEntropyLoss", "dle.nn.MSELoss", "dle.nn.NLLLoss",
       "dle.amp.GradScaler", "dle.nn.L1Loss", "dle.nn.SmoothL1Loss", "dle.nn.HuberLoss", "dle.nn.KLDivLoss",
       "dle.nn.BCELoss", "dle.nn.PoissonNLLLoss", "dle.nn.CosineEmbeddingLoss", "dle.nn.MarginRankingLoss",
       "dle.nn.TripletMarginLoss", "dle.nn.MultiLabelSoftMarginLoss", "dle.nn.HingeEmbeddingLoss",
       "dle.nn.SoftMarginLoss", "dle.nn.GaussianNLLLoss", "dle.nn.CTCLoss", "dle.nn.MultiMarginLoss",
       "dle.nn.MultiLabelMarginLoss"})
allow({"nil"}, "every argument has a default",
      {"dle.Generator", "dle.nn.Dropout", "dle.nn.Flatten", "dle.nn.LogSoftmax", "dle.nn.Softmax",
       "dle.nn.init.calculate_gain", "dle.data.fashion_mnist", "dle.set_memory_limit", "dle.nn.CELU", "dle.nn.ELU",
       "dle.nn.GLU", "dle.nn.Hardshrink", "dle.nn.Hardtanh", "dle.nn.LeakyReLU", "dle.nn.PReLU", "dle.nn.Softmin",
       "dle.nn.Softplus", "dle.nn.Softshrink"})
allow({"nil", "table"}, "a list of modules, possibly empty", {"dle.nn.Sequential", "dle.nn.ModuleList"})
allow({"nil", "table"}, "a table of modules by key, possibly empty", {"dle.nn.ModuleDict"})
allow({"table", "boolean"}, "nested tables and booleans are tensor data", {"dle.tensor"})
allow({"table"}, "an options table, possibly empty", {"dle.set_printoptions"})
allow({"table"}, "a list of rules, possibly empty", {"dle.rewrite.flatten"})
allow({"string"}, "its argument is a string", {"dle.io.json_string"})
allow({"boolean"}, "its argument is a boolean", {"dle.set_grad_enabled"})
allow({"table"}, "a shape: a list of sizes, empty for a 0-dim tensor", {"dle.broadcast_shapes"})

local single_bad = {{"nil", nil}, {"string", "/nonexistent-dle-dir/x"}, {"table", {}}, {"boolean", true}}

describe("API errors", function()
  local targets = W.targets()

  it("the walk reaches the whole API: dle, its submodules, constructors and tensor methods", function()
    local labels = H.index_by(targets, "label", true)
    for _, l in ipairs{"dle.matmul", "dle.exp", "dle.where", "dle.linspace", "Tensor:mm", "Tensor:copy_",
                       "Tensor:clamp", "Tensor:to", "Tensor:sub_", "dle.nn.functional.relu", "dle.nn.Linear",
                       "dle.nn.init.ones_", "dle.optim.SGD", "dle.optim.lr.cosine", "dle.data.idx",
                       "dle.load", "dle.compile", "dle.autograd.Function", "dle.rewrite.apply"} do
      assert.is_true(labels[l] ~= nil, l .. " is not walked")
    end
    assert.is_true(#targets > 400, #targets .. " targets")
  end)

  it("every wrong argument, in each position, gives 'name: ...' at the caller's line, never Lua's own errors",
     function()
    local problems = W.walk(targets)
    local lines = {}
    for i = 1, math.min(#problems, 20) do lines[i] = W.format(problems[i]) end
    assert.are.equal(0, #problems, #problems .. " problems, the first:\n" .. table.concat(lines, "\n"))
  end)

  it("a function given one wrong argument refuses it, unless it is on the documented allow-list", function()
    local problems, used = {}, {}
    for _, tg in ipairs(targets) do
      if not tg.method then
        for _, bv in ipairs(single_bad) do
          local ok = pcall(tg.fn, bv[2])
          local allowed = accepted[tg.label]
          local listed = allowed and (function()
            for _, k in ipairs(allowed.kinds) do if k == bv[1] then return true end end
          end)()
          if listed then used[tg.label .. " " .. bv[1]] = ok end
          if ok and not listed then problems[#problems + 1] = tg.label .. " accepted a " .. bv[1] end
        end
      end
    end
    dle.set_grad_enabled(true)
    dle.set_memory_limit(nil)
    assert.are.same({}, problems)
    -- and the allow-list holds nothing stale
    local stale = {}
    for key, ok in pairs(used) do if not ok then stale[#stale + 1] = key end end
    table.sort(stale)
    assert.are.same({}, stale)
  end)

  it("the message check itself rejects Lua's own phrasing and a missing name", function()
    assert.is_nil(W.check_message("matmul: shapes {2,3} and {4,5}", {"matmul"}, ""))
    assert.is_not_nil(W.check_message("bad argument #1 to 'f' (number expected)", {"f"}, ""))
    assert.is_not_nil(W.check_message("exp: bad argument #1 to '?'", {"exp"}, ""))
    assert.is_not_nil(W.check_message("x.lua:3: attempt to perform arithmetic on a table value", {"sub_"}, "x.lua:3: "))
    assert.is_not_nil(W.check_message("/lua/dle/tensor.lua:9: allclose: x", {"allclose"}, "spec.lua:1: "))
    assert.is_not_nil(W.check_message({}, {"f"}, ""))
  end)

  describe("the forms issue 18 found", function()
    local a, b = dle.zeros(2, 3), dle.zeros(4, 5)

    it("pcall(dle.matmul, a, b) with misaligned shapes names matmul and both shapes", function()
      local ok, msg = pcall(dle.matmul, a, b)
      assert.is_false(ok)
      assert.are.equal("matmul: shapes {2,3} and {4,5} are not aligned (3 vs 4)", msg)
    end)

    it("a C function names itself under pcall, through a local alias and as a method", function()
      local mm = dle.matmul
      local line = debug.getinfo(1, "l").currentline
      local ok1, m1 = pcall(dle.matmul, a, 1)
      local ok2, m2 = pcall(function() local r = mm(a, 1) return r end)      -- line + 2
      local ok3, m3 = pcall(function() local r = a:mm(1) return r end)       -- line + 3
      local ok4, m4 = pcall(a.mm, "x")
      assert.is_false(ok1 or ok2 or ok3 or ok4)
      assert.are.equal("matmul: argument #2 must be a tensor, got number 1", m1)
      assert.are.equal(this_file .. ":" .. (line + 2) .. ": matmul: argument #2 must be a tensor, got number 1", m2)
      assert.are.equal(this_file .. ":" .. (line + 3) .. ": mm: argument #1 must be a tensor, got number 1", m3)
      assert.are.equal("mm: argument #1 must be a tensor, got string", m4)
    end)

    it("argument errors of the creation functions and methods use dle's form", function()
      local cases = {
        {function() return dle.exp(1) end, "exp: argument #1 must be a tensor, got number 1"},
        {function() return dle.eye("x") end, "eye: argument #1 must be an integer, got string"},
        {function() return dle.linspace(0, 1, 2.5) end, "linspace: argument #3 must be an integer, got number 2.5"},
        {function() return dle.bmm(a, nil) end, "bmm: argument #2 must be a tensor, got nil"},
        {function() return a:clamp("x") end, "clamp: argument #1 must be a number, got string"},
        {function() return a:copy_(5) end, "copy_: argument #1 must be a tensor, got number 5"},
        {function() return a:to(5) end, "to: argument #1 must be a string, got number 5"},
        {function() return dle.where(1, a, a) end, "where: argument #1 must be a tensor, got number 1"},
        {function() return dle.log(true) end, "log: argument #1 must be a tensor, got boolean"},
        {function() return dle.set_grad_enabled(1) end,
         "set_grad_enabled: argument #1 must be a boolean, got number 1"},
      }
      for _, c in ipairs(cases) do
        local ok, msg = pcall(c[1])
        assert.is_false(ok)
        assert.are.equal(c[2], msg:gsub("^[^:]+:%d+: ", ""))
      end
    end)

    it("add and sub check their operand before applying alpha", function()
      local ok, msg = pcall(function() return a:sub_({}, {alpha = 1}) end)
      assert.is_false(ok)
      assert.is_truthy(msg:find("sub_: argument #1 must be a tensor or number, got table", 1, true), msg)
      local ok2, msg2 = pcall(function() return a:add("3", {alpha = 2}) end)
      local ok3, msg3 = pcall(function() return a:add("3") end)
      assert.is_false(ok2)
      assert.is_false(ok3)
      assert.are.equal(msg3:gsub("^[^:]+:%d+: ", ""), (msg2:gsub("^[^:]+:%d+: ", "")))
      assert.is_truthy(msg2:find("add: argument #1 must be a tensor or number, got string", 1, true), msg2)
      assert.is_true(a:add(a, {alpha = 2}):equal(a))   -- the valid forms still work
      assert.are.equal(7, dle.ones(1):add(true, {alpha = 6}):item())
    end)

    it("allocation failures name the function that asked, not the allocator", function()
      dle.set_memory_limit(dle.memory_stats().allocated + 1000)
      local ok1, m1 = pcall(dle.randn, 1000)
      local ok2, m2 = pcall(dle.zeros, 1000)
      local ok3, m3 = pcall(dle.full, {1000}, 2)
      dle.set_memory_limit(nil)
      assert.is_false(ok1 or ok2 or ok3)
      assert.is_truthy(m1:find("^randn: allocating {1000} float32 %(4%.0 KB%)"), m1)
      assert.is_truthy(m2:find("^zeros: allocating {1000} float32"), m2)
      assert.is_truthy(m3:find("^full: allocating {1000} float32"), m3)
    end)
  end)

  describe("file loaders", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

    local function write(name, bytes)
      local f = assert(io.open(dir .. "/" .. name, "wb"))
      f:write(bytes)
      f:close()
      return dir .. "/" .. name
    end

    it("loading a directory says it is one", function()
      for _, fn in ipairs{"load", "load_npy", "load_safetensors"} do
        local ok, msg = pcall(dle[fn], dir)
        assert.is_false(ok)
        assert.are.equal("dle." .. fn .. ": cannot read " .. dir .. ": Is a directory", (msg:gsub("^[^:]+:%d+: ", "")))
      end
    end)

    it("an IDX file whose sizes overflow behind a zero size is refused", function()
      local p = write("z.idx", "\0\0\8\4" .. string.pack(">I4I4I4I4", 0, 0xFFFFFF, 0xFFFFFF, 0xFFFFFF))
      local ok, msg = pcall(dle.data.idx, p)
      assert.is_false(ok)
      assert.are.equal("idx: " .. p .. ": sizes too large (dim 4 is 16777215)", msg)
    end)

    it("an IDX allocation failure names idx and the file", function()
      local p = write("big.idx", "\0\0\8\2" .. string.pack(">I4I4", 2000, 2000) .. ("x"):rep(4000000))
      dle.set_memory_limit(dle.memory_stats().allocated + 1000000)
      local ok, msg = pcall(dle.data.idx, p)
      dle.set_memory_limit(nil)
      assert.is_false(ok)
      local want = "^idx: " .. p:gsub("%p", "%%%0") .. ": allocating {2000,2000} uint8 %(4%.0 MB%) would exceed"
      assert.is_truthy(msg:find(want), msg)
      assert.are.same({2000, 2000}, dle.data.idx(p):shape())   -- and loads without the cap
    end)
  end)
end)
