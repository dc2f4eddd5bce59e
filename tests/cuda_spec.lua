-- The CUDA backend (kernels/cuda/, built as libdle_cuda.so when nvcc is found).
-- Without a GPU (this machine, CI) it must build, load, list its kernels and say "no CUDA device";
-- the checks of its results against the CPU kernels need a GPU and are pending here.
-- DLE_TEST_CUDA_AS=cpu runs those checks with the CPU standing in for the GPU: it checks the
-- spec itself (its inputs, layouts and op calls), not the CUDA kernels.
local dle = require("dle")
local H = require("helpers")

local build = os.getenv("DLE_BUILD") or "build"
local library = build .. "/lib/dle/libdle_cuda.so"
local stand_in = os.getenv("DLE_TEST_CUDA_AS")
local gpu = stand_in or "cuda"
local have_gpu, no_gpu_reason = dle.cuda_available()

-- The ops listed in kernels/cuda/cpu_only.txt (first word of each line that is not a comment).
local function cpu_only_ops()
  local ops = {}
  for line in assert(io.lines("kernels/cuda/cpu_only.txt")) do
    local name = line:match("^%s*([%w_]+)")
    if name then ops[name] = true end
  end
  return ops
end

describe("the CUDA backend library", function()
  it("is built when nvcc is found and exports its two entry points", function()
    if not H.assert_built_when(H.nvcc() ~= nil, library, "nvcc") then return end
    local p = assert(io.popen("nm -D --defined-only " .. library .. " 2>&1"))
    local symbols = p:read("a")
    p:close()
    assert.truthy(symbols:find(" T dle_cuda_backend_init\n", 1, true), symbols:sub(1, 200))
    assert.truthy(symbols:find(" T dle_cuda_backend_table\n", 1, true))
  end)

  it("leaves no symbol unresolved that only the engine defines", function()
    if not H.exists(library) then return pending("libdle_cuda.so was not built (no nvcc)") end
    local p = assert(io.popen("nm -D --undefined-only " .. library .. " 2>&1"))
    local undefined = p:read("a")
    p:close()
    assert.is_nil(undefined:match("%f[%w_]dle_[%w_]+"), "engine symbols needed: " .. undefined)
  end)

  it("loads, and dle.cuda_available() says why it cannot be used", function()
    local ok, why = dle.cuda_available()
    if ok then
      assert.is_nil(why)
      return
    end
    assert.is_string(why)
    assert.truthy(why:find("CUDA backend not available", 1, true), why)
    if H.exists(library) then
      -- loaded fine; only the device is missing
      assert.truthy(why:find("no CUDA device", 1, true), why)
      assert.is_nil(why:find("could not be loaded", 1, true), why)
    else
      assert.truthy(why:find("was not built or could not be loaded", 1, true), why)
    end
  end)

  it("moving or creating a tensor on cuda without a device raises an error naming the function", function()
    if have_gpu then return pending("a CUDA device is present") end
    local a = dle.ones(2, 3)
    local reason = H.exists(library) and "no CUDA device" or "not available"
    H.assert_error(function() return a:cuda() end, "cuda:", reason)
    H.assert_error(function() return a:cuda(1) end, "cuda:", reason)
    H.assert_error(function() return a:to("cuda") end, "to(cuda:0)", reason)
    H.assert_error(function() return a:to("cuda:1") end, "to(cuda:1)", reason)
    H.assert_error(function() return dle.zeros(2, {device = "cuda"}) end, "zeros:", reason)
    H.assert_error(function() return dle.ones({2, 2}, {device = "cuda"}) end, "ones:", reason)
    H.assert_error(function() return dle.full({2}, 7, {device = "cuda"}) end, "full:", reason)
    H.assert_error(function() return dle.rand(3, {device = "cuda"}) end, "rand:", reason)
    H.assert_error(function() return dle.tensor({1, 2}, {device = "cuda"}) end, "tensor:", reason)
    H.assert_error(function() return dle.zeros_like(a, {device = "cuda"}) end, "zeros_like:", reason)
    -- the CPU keeps working afterwards
    assert.are.equal(6, a:sum():item())
  end)
end)

describe("the CUDA kernel table", function()
  local ops = dle.core.op_table()

  it("covers every op of ops.def but views and the documented CPU-only ops", function()
    local cuda, why = dle.core._kernel_ops("cuda")
    if not cuda then
      assert.is_false(H.exists(library), why)
      return pending("libdle_cuda.so was not built: " .. why)
    end
    local has, cpu_only = {}, cpu_only_ops()
    for _, name in ipairs(cuda) do has[name] = true end
    local missing, listed_but_there = {}, {}
    for _, op in ipairs(ops) do
      if op.kind ~= "view" then
        if not has[op.name] and not cpu_only[op.name] then missing[#missing + 1] = op.name end
        if has[op.name] and cpu_only[op.name] then listed_but_there[#listed_but_there + 1] = op.name end
      else
        assert.is_nil(has[op.name], "view op " .. op.name .. " has a kernel")
      end
    end
    assert.are.same({}, missing)            -- a new op needs a CUDA kernel or a line in cpu_only.txt
    assert.are.same({}, listed_but_there)   -- the list is current
  end)

  it("has a CPU kernel for every CUDA kernel (the CPU is the reference)", function()
    local cuda = dle.core._kernel_ops("cuda")
    if not cuda then return pending("libdle_cuda.so was not built") end
    local cpu = {}
    for _, name in ipairs(assert(dle.core._kernel_ops("cpu"))) do cpu[name] = true end
    for _, name in ipairs(cuda) do assert.is_true(cpu[name], name) end
    assert.is_true(#cuda >= 60, "only " .. #cuda .. " CUDA kernels")
  end)

  it("rejects unknown device names", function()
    H.assert_error(function() return dle.core._kernel_ops("tpu") end, "kernel_ops:", "tpu")
  end)
end)

-- ---------------------------------------------------------------- results against the CPU

-- Runs f only where a GPU (or the stand-in) is there; pending with the reason elsewhere.
local function on_gpu(f)
  return function()
    if not (have_gpu or stand_in) then return pending("no CUDA device here: " .. tostring(no_gpu_reason)) end
    f()
  end
end

local tol = {float32 = {rtol = 1e-5, atol = 1e-6}, float64 = {rtol = 1e-12, atol = 1e-14},
             float16 = {rtol = 2e-3, atol = 1e-3}, bfloat16 = {rtol = 1.6e-2, atol = 1e-2},
             int32 = {rtol = 0, atol = 0}, int64 = {rtol = 0, atol = 0}, uint8 = {rtol = 0, atol = 0},
             bool = {rtol = 0, atol = 0}}
local floats = {"float32", "float64", "float16", "bfloat16"}
local all_dtypes = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"}

-- The same values as a CPU tensor and a GPU tensor, both in the given layout (views are made on
-- each device, so the GPU kernels see the strides): contiguous, transposed, sliced (offset and
-- strides), broadcast (a row expanded with stride 0).
local function pair(values, dtype, layout)
  local opts = {dtype = dtype}
  local shape = H.shape(values)
  local function both(t, view)
    local c = view and view(t) or t
    local g = t:to(gpu)
    return c, view and view(g) or g
  end
  if layout == "transposed" and #shape >= 2 then
    local perm = {}
    for d = 1, #shape do perm[d] = #shape + 1 - d end
    return both(dle.tensor(H.permute(values, perm), opts), function(t) return t:permute(perm) end)
  elseif layout == "sliced" then
    local padded = {}
    for d = 1, #shape do padded[d] = shape[d] + 2 end
    local view = function(b)
      for d = 1, #shape do b = b:narrow(d, 2, shape[d]) end
      return b
    end
    local big = dle.full(padded, 99, opts)
    view(big):copy_(dle.tensor(values, opts))
    return both(big, view)
  elseif layout == "broadcast" and #shape >= 2 then
    return both(dle.tensor({values[1]}, opts), function(t) return t:expand(shape) end)
  end
  return both(dle.tensor(values, opts))
end

local layouts = {"contiguous", "transposed", "sliced", "broadcast"}

-- f(dtype, layout) for every dtype of dts and every layout
local function each_layout(dts, f)
  for _, dt in ipairs(dts) do
    for _, layout in ipairs(layouts) do f(dt, layout) end
  end
end

-- Values for dtype: positive floats for the float ops (log, sqrt), small integers otherwise.
local function values_for(shape, dtype, seed)
  local k = seed or 0
  return H.build(shape, function()
    k = k + 1
    local v = ((k * 37) % 23) / 7 - 1.3
    if dtype == "bool" then return k % 3 == 0 end
    if dtype == "uint8" then return (k * 7) % 11 end
    if dtype:match("^int") then return (k * 5) % 13 - 6 end
    return v
  end)
end

local compared = 0
local function compare(what, got, want)
  compared = compared + 1
  assert.are.equal(want:dtype(), got:dtype(), what .. ": dtype")
  assert.are.same(want:shape(), got:shape(), what .. ": shape")
  local t = tol[want:dtype()]
  H.assert_close(got:to("cpu"), want:totable(), {rtol = t.rtol, atol = t.atol, msg = what})
end

local function call(name, x, ...)
  local f = dle[name] or x[name]
  return f(x, ...)
end

local unary_args = {clamp = {-0.5, 0.7}, pow_scalar = {2}}
local lua_name = {pow_scalar = "pow"}

describe("CUDA kernels against the CPU", function()
  local ops = dle.core.op_table()
  local shapes = {{7}, {3, 5}, {2, 3, 5}}

  it("unary ops in every dtype, layout and odd size", on_gpu(function()
    for _, op in ipairs(ops) do
      if op.kind == "unary" then
        for _, dt in ipairs(all_dtypes) do
          for _, shape in ipairs(shapes) do
            for _, layout in ipairs(layouts) do
              local vals = values_for(shape, dt)
              if op.name == "log" or op.name == "sqrt" or op.name == "rsqrt" or op.name == "log1p" then
                vals = H.map(vals, function(v) return type(v) == "number" and math.abs(v) + 0.25 or v end)
              end
              local c, g = pair(vals, dt, layout)
              local name = lua_name[op.name] or op.name
              local okc, want = pcall(call, name, c, table.unpack(unary_args[op.name] or {}))
              local okg, got = pcall(call, name, g, table.unpack(unary_args[op.name] or {}))
              local what = op.name .. " " .. dt .. " " .. layout .. " {" .. table.concat(shape, ",") .. "}"
              assert.are.equal(okc, okg, what .. ": " .. tostring(okc and got or want))
              if okc then compare(what, got, want) end
            end
          end
        end
      end
    end
  end))

  it("binary and comparison ops with broadcasting in every dtype", on_gpu(function()
    for _, op in ipairs(ops) do
      if op.kind == "binary" or op.kind == "compare" then
        for _, dt in ipairs(all_dtypes) do
          for _, layout in ipairs(layouts) do
            local a, ga = pair(values_for({3, 5}, dt, 1), dt, layout)
            local b, gb = pair(values_for({5}, dt, 2), dt, "contiguous")         -- a row, broadcast
            if op.name == "pow" and dt:match("int") then b, gb = pair({0, 1, 2, 3, 1}, dt, "contiguous") end
            local okc, want = pcall(call, op.name, a, b)
            local okg, got = pcall(call, op.name, ga, gb)
            local what = op.name .. " " .. dt .. " " .. layout
            assert.are.equal(okc, okg, what .. ": " .. tostring(okc and got or want))
            if okc then compare(what, got, want) end
            if okc then compare(what .. " (swapped)", call(op.name, gb, ga), call(op.name, b, a)) end
          end
        end
      end
    end
  end))

  it("where, casts between every pair of dtypes, contiguous() of views, fill_", on_gpu(function()
    local cond, gcond = pair({{true, false, true}, {false, false, true}}, "bool", "transposed")
    for _, dt in ipairs(all_dtypes) do
      local a, ga = pair(values_for({2, 3}, dt, 3), dt, "sliced")
      local b, gb = pair(values_for({3}, dt, 4), dt, "contiguous")
      compare("where " .. dt, dle.where(gcond, ga, gb), dle.where(cond, a, b))
      for _, to in ipairs(all_dtypes) do
        for _, layout in ipairs(layouts) do
          local x, gx = pair(values_for({3, 4}, dt, 5), dt, layout)
          compare(dt .. " -> " .. to .. " " .. layout, gx:to(to), x:to(to))
        end
      end
      for _, layout in ipairs(layouts) do
        local x, gx = pair(values_for({4, 3}, dt, 6), dt, layout)
        local gc = gx:contiguous()
        assert.is_true(gc:is_contiguous())
        compare("contiguous " .. dt .. " " .. layout, gc, x:contiguous())
        compare("fill_ " .. dt .. " " .. layout, gx:clone():t():fill_(3):t(), x:clone():t():fill_(3):t())
      end
    end
  end))

  it("reductions over any dims, with keepdim, in every dtype", on_gpu(function()
    local dims_list = {{}, {1}, {2}, {-1}, {1, 3}}
    local reds = {"sum", "prod", "mean", "var", "std", "logsumexp", "amax", "amin"}
    for _, dt in ipairs(all_dtypes) do
      for _, layout in ipairs(layouts) do
        local x, gx = pair(values_for({3, 4, 5}, dt, 7), dt, layout)
        for _, r in ipairs(reds) do
          for _, dims in ipairs(dims_list) do
            for _, keep in ipairs({false, true}) do
              local okc, want = pcall(function()
                if #dims == 0 then return x[r](x) end
                return x[r](x, dims, keep)
              end)
              local okg, got = pcall(function()
                if #dims == 0 then return gx[r](gx) end
                return gx[r](gx, dims, keep)
              end)
              local what = r .. " " .. dt .. " " .. layout .. " dims {" .. table.concat(dims, ",") .. "}"
              assert.are.equal(okc, okg, what .. ": " .. tostring(okc and got or want))
              if okc then compare(what, got, want) end
            end
          end
        end
        for _, f in ipairs({"max", "min"}) do
          for _, d in ipairs({1, 2, 3}) do
            local v, i = x[f](x, d)
            local gv, gi = gx[f](gx, d)
            compare(f .. " values " .. dt .. " " .. layout, gv, v)
            compare(f .. " indices " .. dt .. " " .. layout, gi, i)
          end
        end
        compare("argmax " .. dt .. " " .. layout, gx:argmax(), x:argmax())
        compare("argmin dim 2 " .. dt .. " " .. layout, gx:argmin(2), x:argmin(2))
      end
    end
    -- ties keep the first index; NaN wins and the first NaN stays
    local t, gt = pair({{1, 3, 3, 0 / 0, 0 / 0}, {2, 2, 1, 2, 2}}, "float32", "contiguous")
    compare("argmax ties and NaN", gt:argmax(2), t:argmax(2))
    compare("argmin ties and NaN", gt:argmin(2), t:argmin(2))
  end))

  it("softmax and log_softmax along every dim, numerically stable", on_gpu(function()
    each_layout(floats, function(dt, layout)
      local x, gx = pair(values_for({3, 4, 5}, dt, 8), dt, layout)
      for _, d in ipairs({1, 2, 3, -1}) do
        compare("softmax " .. dt .. " " .. layout .. " " .. d, gx:softmax(d), x:softmax(d))
        compare("log_softmax " .. dt .. " " .. layout .. " " .. d, gx:log_softmax(d), x:log_softmax(d))
      end
      local big, gbig = pair({{1000, 1001, 999}, {-1000, -1e4, -999}}, dt, "contiguous")
      compare("softmax of large values " .. dt, gbig:softmax(2), big:softmax(2))
    end)
  end))

  it("matmul: 1-D, 2-D, transposed operands, broadcast batches, odd sizes, every dtype", on_gpu(function()
    local cases = {{{5}, {5}}, {{3, 5}, {5}}, {{5}, {5, 7}}, {{3, 5}, {5, 7}}, {{2, 3, 5}, {5, 7}},
                   {{2, 1, 3, 5}, {4, 5, 7}}, {{1, 1}, {1, 9}}}
    for _, dt in ipairs({"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8"}) do
      for _, c in ipairs(cases) do
        for _, la in ipairs({"contiguous", "transposed", "sliced"}) do
          for _, lb in ipairs({"contiguous", "transposed", "broadcast"}) do
            local a, ga = pair(values_for(c[1], dt, 9), dt, la)
            local b, gb = pair(values_for(c[2], dt, 10), dt, lb)
            local what = "matmul " .. dt .. " " .. la .. " x " .. lb .. " {" .. table.concat(c[1], ",") ..
                         "} {" .. table.concat(c[2], ",") .. "}"
            compare(what, ga:matmul(gb), a:matmul(b))
          end
        end
      end
    end
    local a, ga = pair(values_for({4, 6}, "float32", 11), "float32", "contiguous")
    local b, gb = pair(values_for({6, 3}, "float32", 12), "float32", "contiguous")
    local c, gc = pair(values_for({3}, "float32", 13), "float32", "contiguous")
    compare("addmm", dle.addmm and dle.addmm(gc, ga, gb) or ga:matmul(gb) + gc,
            dle.addmm and dle.addmm(c, a, b) or a:matmul(b) + c)
  end))

  it("cross_entropy and embedding forward and backward, with smoothing, ignored rows, padding", on_gpu(function()
    for _, dt in ipairs({"float32", "float64"}) do
      local x, gx = pair(values_for({5, 7}, dt, 14), dt, "contiguous")
      local t, gt = pair({1, 7, 3, 3, 2}, "int64", "contiguous")
      local F = dle.nn.functional
      for _, opts in ipairs({{}, {reduction = "sum"}, {reduction = "none"}, {label_smoothing = 0.1},
                             {ignore_index = 3}}) do
        local xc, xg = x:clone():requires_grad_(true), gx:clone():requires_grad_(true)
        local lc, lg = F.cross_entropy(xc, t, opts), F.cross_entropy(xg, gt, opts)
        compare("cross_entropy " .. dt, lg, lc)
        lc:sum():backward()
        lg:sum():backward()
        compare("cross_entropy grad " .. dt, xg.grad, xc.grad)
      end
      local w, gw = pair(values_for({9, 4}, dt, 27), dt, "contiguous")
      local idx, gidx = pair({{1, 9, 3}, {3, 3, 2}}, "int64", "contiguous")
      for _, opts in ipairs({{}, {padding_idx = 3}}) do
        local wc, wg = w:clone():requires_grad_(true), gw:clone():requires_grad_(true)
        local ec, eg = F.embedding(idx, wc, opts), F.embedding(gidx, wg, opts)
        compare("embedding " .. dt, eg, ec)
        dle.sum(ec * ec):backward()
        dle.sum(eg * eg):backward()
        compare("embedding grad " .. dt, wg.grad, wc.grad)
      end
      H.assert_error(function() return F.embedding(dle.tensor({10}, {dtype = "int64"}):to(gpu), gw) end,
                     "embedding", "index 10")
      local bad = dle.tensor({1, 8, 3, 3, 2}, {dtype = "int64"}):to(gpu)
      H.assert_error(function() return F.cross_entropy(gx, bad) end, "cross_entropy", "target 8")
    end
  end))

  it("layer_norm forward and backward, batch_norm forward", on_gpu(function()
    for _, dt in ipairs(floats) do
      local x, gx = pair(values_for({4, 3, 5}, dt, 15), dt, "contiguous")
      local w, gw = pair(values_for({5}, dt, 16), dt, "contiguous")
      local b, gb = pair(values_for({5}, dt, 17), dt, "contiguous")
      local F = dle.nn.functional
      local xc, xg = x:clone():requires_grad_(true), gx:clone():requires_grad_(true)
      local wc, wg = w:clone():requires_grad_(true), gw:clone():requires_grad_(true)
      local yc = F.layer_norm(xc, wc, b)
      local yg = F.layer_norm(xg, wg, gb)
      compare("layer_norm " .. dt, yg, yc)
      dle.sum(yc * yc):backward()
      dle.sum(yg * yg):backward()
      compare("layer_norm grad x " .. dt, xg.grad, xc.grad)
      compare("layer_norm grad w " .. dt, wg.grad, wc.grad)
      local bn, gbn = pair(values_for({4, 3, 2, 2}, dt, 18), dt, "contiguous")
      bn, gbn = bn:clone():requires_grad_(true), gbn:clone():requires_grad_(true)
      local zc, zg = F.batch_norm(bn, nil, nil, nil, nil, true), F.batch_norm(gbn, nil, nil, nil, nil, true)
      compare("batch_norm " .. dt, zg, zc)
      dle.sum(zc * zc):backward()
      dle.sum(zg * zg):backward()
      compare("batch_norm grad x " .. dt, gbn.grad, bn.grad)
    end
  end))

  it("rand and randint give the CPU's numbers; randn matches within rounding", on_gpu(function()
    for _, dt in ipairs(floats) do
      local g1, g2 = dle.Generator(123), dle.Generator(123)
      local c = dle.rand({5, 7}, {dtype = dt, generator = g1})
      local g = dle.rand({5, 7}, {dtype = dt, generator = g2, device = gpu})
      compare("rand " .. dt, g, c)
      compare("randn " .. dt, dle.randn({3, 5}, {dtype = dt, generator = g2, device = gpu}),
              dle.randn({3, 5}, {dtype = dt, generator = g1}))
      -- in-place fills write into the GPU tensor through the kernel
      local into = dle.zeros({5, 7}, {dtype = dt}):to(gpu)
      into:uniform_(0, 1, {generator = dle.Generator(5)})
      compare("uniform_ " .. dt, into, dle.zeros({5, 7}, {dtype = dt}):uniform_(0, 1, {generator = dle.Generator(5)}))
    end
    for _, dt in ipairs(all_dtypes) do
      local hi = dt == "bool" and 2 or 9
      local c = dle.randint(0, hi, {4, 6}, {dtype = dt, generator = dle.Generator(7)})
      local g = dle.randint(0, hi, {4, 6}, {dtype = dt, generator = dle.Generator(7), device = gpu})
      compare("randint " .. dt, g, c)
    end
  end))

  it("masked_fill, tril and triu in every dtype and layout", on_gpu(function()
    each_layout(all_dtypes, function(dt, layout)
      local x, gx = pair(values_for({4, 5}, dt, 19), dt, layout)
      local m, gm = pair({{true, false, false, true, false}}, "bool", "contiguous") -- broadcast rows
      local v = dt == "bool" and 1 or 7
      compare("masked_fill " .. dt .. " " .. layout, gx:masked_fill(gm, v), x:masked_fill(m, v))
      for _, k in ipairs({-2, 0, 1, 9}) do
        compare("tril " .. k .. " " .. dt .. " " .. layout, gx:tril(k), x:tril(k))
        compare("triu " .. k .. " " .. dt .. " " .. layout, gx:triu(k), x:triu(k))
      end
    end)
  end))

  it("cat, gather, index_select, scatter_add, index_add and one_hot, with bad indices named", on_gpu(function()
    each_layout(all_dtypes, function(dt, layout)
      local x, gx = pair(values_for({4, 5}, dt, 24), dt, layout)
      local y, gy = pair(values_for({4, 3}, dt, 25), dt, "transposed")
      compare("cat dim 2 " .. dt .. " " .. layout, dle.cat({gx, gy}, 2), dle.cat({x, y}, 2))
      compare("cat dim 1 " .. dt .. " " .. layout, dle.cat({gx, gx}, 1), dle.cat({x, x}, 1))
      local i, gi = pair({{1, 5, 2}, {4, 4, 1}}, "int64", layout)
      compare("gather " .. dt .. " " .. layout, gx:gather(2, gi), x:gather(2, i))
      local j, gj = pair({3, 1, 3}, "int64", "contiguous")
      compare("index_select " .. dt .. " " .. layout, gx:index_select(1, gj), x:index_select(1, j))
      compare("index_select dim 2 " .. dt .. " " .. layout, gx:index_select(2, gj), x:index_select(2, j))
    end)
    each_layout(all_dtypes, function(dt, layout)
      local s, gs = pair(values_for({3, 5}, dt, 28), dt, layout)
      local src, gsrc = pair(values_for({2, 5}, dt, 29), dt, "contiguous")
      local i, gi = pair({{1, 2, 3, 1, 2}, {3, 3, 1, 1, 1}}, "int64", "contiguous")
      compare("scatter_add " .. dt .. " " .. layout, gs:scatter_add(1, gi, gsrc), s:scatter_add(1, i, src))
      local j, gj = pair({3, 1}, "int64", "contiguous")
      compare("index_add " .. dt .. " " .. layout, gs:index_add(1, gj, gsrc), s:index_add(1, j, src))
    end)
    local c, gc = pair({{1, 4}, {2, 2}}, "int64", "transposed")
    compare("one_hot", gc:one_hot(5), c:one_hot(5))
    local _, gx = pair(values_for({4, 5}, "float32", 26), "float32", "contiguous")
    local bad = dle.tensor({{1, 6}}, {dtype = "int64"}):to(gpu)
    H.assert_error(function() return gx:gather(2, bad) end, "gather", "index 6")
  end))

  it("mse, bce with logits, nll and soft cross-entropy, forward and backward", on_gpu(function()
    local F = dle.nn.functional
    for _, dt in ipairs({"float32", "float64"}) do
      local x, gx = pair(values_for({5, 7}, dt, 20), dt, "contiguous")
      local y, gy = pair(H.map(values_for({5, 7}, dt, 21), function(v) return (v + 2) / 4 end), dt, "contiguous")
      local w, gw = pair(values_for({7}, dt, 22), dt, "contiguous")
      local t, gt = pair({1, 7, 3, 3, 2}, "int64", "contiguous")
      local p, gp = pair(H.map(values_for({5, 7}, dt, 23), function(v) return math.abs(v) / 10 end), dt, "contiguous")
      local cases = {
        {"mse_loss", function(a, b) return F.mse_loss(a, b.y, b.opts) end},
        {"bce", function(a, b) return F.binary_cross_entropy_with_logits(a, b.y, b.opts) end},
        {"bce pos_weight", function(a, b)
          return F.binary_cross_entropy_with_logits(a, b.y, {reduction = b.opts.reduction, pos_weight = b.w}) end},
        {"nll_loss", function(a, b) return F.nll_loss(a, b.t, b.opts) end},
        {"soft cross_entropy", function(a, b) return F.cross_entropy(a, b.p, b.opts) end},
      }
      for _, case in ipairs(cases) do
        for _, opts in ipairs({{}, {reduction = "sum"}, {reduction = "none"}}) do
          local xc, xg = x:clone():requires_grad_(true), gx:clone():requires_grad_(true)
          local lc = case[2](xc, {y = y, w = w, t = t, p = p, opts = opts})
          local lg = case[2](xg, {y = gy, w = gw, t = gt, p = gp, opts = opts})
          local what = case[1] .. " " .. dt .. " " .. (opts.reduction or "mean")
          compare(what, lg, lc)
          dle.sum(lc * lc):backward()
          dle.sum(lg * lg):backward()
          compare(what .. " grad", xg.grad, xc.grad)
        end
      end
    end
  end))

  it("conv2d with stride, padding, dilation and groups, its gradients, and pooling", on_gpu(function()
    local F = dle.nn.functional
    local cases = {{{}, 1}, {{stride = 2, padding = 1}, 1}, {{padding = 2, dilation = 2}, 1},
                   {{groups = 2, stride = {1, 2}}, 2}}
    for _, dt in ipairs(floats) do
      for _, c in ipairs(cases) do
        local x, gx = pair(values_for({2, 4, 7, 6}, dt, 31), dt, "contiguous")
        local w, gw = pair(values_for({6, 4 // c[2], 3, 3}, dt, 32), dt, "contiguous")
        local b, gb = pair(values_for({6}, dt, 33), dt, "contiguous")
        local xc, xg = x:clone():requires_grad_(true), gx:clone():requires_grad_(true)
        local wc, wg = w:clone():requires_grad_(true), gw:clone():requires_grad_(true)
        local yc, yg = F.conv2d(xc, wc, b, c[1]), F.conv2d(xg, wg, gb, c[1])
        compare("conv2d " .. dt, yg, yc)
        dle.sum(yc * yc):backward()
        dle.sum(yg * yg):backward()
        compare("conv2d grad x " .. dt, xg.grad, xc.grad)
        compare("conv2d grad w " .. dt, wg.grad, wc.grad)
      end
      local x, gx = pair(values_for({2, 3, 7, 6}, dt, 34), dt, "contiguous")
      for _, opts in ipairs({{}, {stride = 1, padding = 1}}) do
        local vc, ic = F.max_pool2d(x, 2, {stride = opts.stride, padding = opts.padding, return_indices = true})
        local vg, ig = F.max_pool2d(gx, 2, {stride = opts.stride, padding = opts.padding, return_indices = true})
        compare("max_pool2d " .. dt, vg, vc)
        compare("max_pool2d indices " .. dt, ig, ic)
        local xc, xg = x:clone():requires_grad_(true), gx:clone():requires_grad_(true)
        local ac = F.avg_pool2d(xc, 3, {stride = opts.stride, padding = opts.padding, count_include_pad = false})
        local ag = F.avg_pool2d(xg, 3, {stride = opts.stride, padding = opts.padding, count_include_pad = false})
        compare("avg_pool2d " .. dt, ag, ac)
        dle.sum(ac * ac):backward()
        dle.sum(ag * ag):backward()
        compare("avg_pool2d grad " .. dt, xg.grad, xc.grad)
      end
    end
  end))

  it("scaled dot-product attention with masks, causal rows and head-split layouts, and its gradients", on_gpu(function()
    for _, dt in ipairs({"float32", "float64"}) do
      -- q, k, v as head-split views of {B, T, H*E} projections: {B, H, T, E} through strides
      local function heads(seed, t)
        local x, gx = pair(values_for({2, t, 6}, dt, seed), dt, "contiguous")
        local f = function(y) return y:view(2, t, 2, 3):permute(1, 3, 2, 4) end
        return f(x), f(gx)
      end
      local cases = {{{}, 5, 5}, {{causal = true}, 5, 5}, {{causal = true}, 70, 70}, {{}, 4, 6}}
      for _, c in ipairs(cases) do
        local q, gq = heads(35, c[2])
        local k, gk = heads(36, c[3])
        local v, gv = heads(37, c[3])
        local qc, qg = q:clone():requires_grad_(true), gq:clone():requires_grad_(true)
        local kc, kg = k:clone():requires_grad_(true), gk:clone():requires_grad_(true)
        local oc, pc = dle.sdpa(qc, kc, v, c[1])
        local og, pg = dle.sdpa(qg, kg, gv, c[1])
        local what = "sdpa " .. dt .. " L " .. c[2] .. " S " .. c[3] .. (c[1].causal and " causal" or "")
        compare(what, og, oc)
        compare(what .. " probs", pg, pc)
        dle.sum(oc * oc):backward()
        dle.sum(og * og):backward()
        compare(what .. " grad q", qg.grad, qc.grad)
        compare(what .. " grad k", kg.grad, kc.grad)
      end
      local q, gq = heads(38, 4)
      local m, gm = pair({{true, false, true, true}, {false, false, false, false}, {true, true, true, true},
                          {false, true, false, true}}, "bool", "contiguous")
      compare("sdpa bool mask " .. dt, (dle.sdpa(gq, gq, gq, {mask = gm})), (dle.sdpa(q, q, q, {mask = m})))
      local f, gf = pair(values_for({4, 4}, dt, 39), dt, "transposed")
      compare("sdpa float mask " .. dt, (dle.sdpa(gq, gq, gq, {mask = gf})), (dle.sdpa(q, q, q, {mask = f})))
    end
  end))

  it("fused optimizer steps on GPU params match the CPU's", on_gpu(function()
    local configs = {{"SGD", {lr = 0.1}}, {"SGD", {lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.01}},
                     {"Adagrad", {lr = 0.1, lr_decay = 0.01}},
                         {"RMSprop", {lr = 0.01, momentum = 0.5, centered = true}},
                     {"Adam", {lr = 0.01, amsgrad = true, weight_decay = 0.1}},
                         {"AdamW", {lr = 0.01, weight_decay = 0.1}}}
    for _, dt in ipairs(floats) do
      for _, c in ipairs(configs) do
        local x, gx = pair(values_for({3, 5}, dt, 30), dt, "contiguous")
        local pc, pg = x:clone():requires_grad_(true), gx:clone():requires_grad_(true)
        local oc, og = dle.optim[c[1]]({pc}, c[2]), dle.optim[c[1]]({pg}, c[2])
        for _ = 1, 3 do
          for _, po in ipairs({{pc, oc}, {pg, og}}) do
            po[2]:zero_grad()
            dle.sum(po[1] * po[1] * po[1]):backward()
            po[2]:step()
          end
        end
        compare(c[1] .. " " .. dt, pg:detach(), pc:detach())
      end
    end
  end))

  it("made every comparison above", on_gpu(function()
    assert.is_true(compared > 3000, compared .. " comparisons")
  end))

  it("ops without a CUDA kernel name the op and the device", on_gpu(function()
    if stand_in then return end -- the CPU has every kernel
    local x = dle.ones(1, 1, 4, 4):to(gpu)
    local w = dle.ones(1, 1, 3, 3):to(gpu)
    H.assert_error(function() return dle.nn.functional.conv2d(x, w) end, "conv2d", "cuda:0", ":cpu()")
  end))
end)
