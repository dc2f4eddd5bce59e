--- Autodiff in Lua: forward mode (dle.jvp), gradient checking (dle.gradcheck) and custom
-- differentiable ops (dle.autograd.Function). Reverse mode itself (t:backward, dle.grad,
-- dle.no_grad) and dle.autocast are native (bindings/lua_autograd.c).
local check = require("dle.check")

local M = {}

-- An installer rather than only a table of functions: it wraps the tensor method backward (hooks
-- run around the native one), which merging a table into dle cannot do.
function M.install(dle)
  local core = dle.core
  dle.autograd = dle.autograd or {}

  -- A tensor or a list of tensors as a list (and whether it was a single tensor); anything else
  -- is an error naming fn and the argument.
  local function as_list(v, fn, what)
    if core.is_tensor(v) then return {v}, true end
    if type(v) ~= "table" then
      check.error(string.format("%s: %s must be a tensor or a list of tensors, got %s", fn, what, check.typename(v)))
    end
    for i, x in ipairs(v) do
      if not core.is_tensor(x) then
        check.error(string.format("%s: %s[%d] must be a tensor, got %s", fn, what, i, check.typename(x)))
      end
    end
    return v, false
  end

  --- dle.jvp(f, inputs, tangents) -> outputs, output_tangents (forward mode).
  -- inputs/tangents: a tensor or a list of tensors. Each op computes its output's tangent from
  -- its inputs' with its forward rule while f runs. Returns what f returns (a tensor, or a list
  -- when f returns several values) and the matching tangent(s).
  function dle.jvp(f, inputs, tangents)
    check.callable(f, "jvp", "f")
    local ins = as_list(inputs, "jvp", "inputs")
    local tans = as_list(tangents, "jvp", "tangents")
    if #tans ~= #ins then
      check.error(string.format("jvp: %d tangents for %d inputs", #tans, #ins))
    end
    local primals = {}
    for i, x in ipairs(ins) do
      primals[i] = x:detach()
      core._set_tangent(primals[i], tans[i])
    end
    local results = table.pack(f(table.unpack(primals, 1, #ins)))
    local outs, out_tans = {}, {}
    for k = 1, results.n do
      local o = results[k]
      if not core.is_tensor(o) then check.error("jvp: f returned a " .. type(o) .. " as result " .. k) end
      outs[k] = o
      out_tans[k] = core._tangent(o) or dle.zeros_like(o)
      core._set_tangent(o, nil)
    end
    for _, p in ipairs(primals) do core._set_tangent(p, nil) end
    if results.n == 1 then return outs[1], out_tans[1] end
    return outs, out_tans
  end

  -- A complex tensor as the real numbers it holds (view_as_real: re, im of each element in turn);
  -- a real one as itself.
  local function reals(t) return t:is_complex() and dle.view_as_real(t) or t end
  local function flat(t) return reals(t):contiguous():view(-1):totable() end

  --- dle.gradcheck(f, inputs, {eps, atol, rtol, forward}) -> ok, max_abs_error[, message]
  -- Compares the gradients of f at inputs (copied to float64, complex ones to complex128) from
  -- reverse mode (and from forward mode when opts.forward) with central finite differences. f
  -- returns one tensor or several; integer outputs are ignored. Complex numbers are checked as
  -- PyTorch's gradcheck does, as their real and imaginary parts: each part of a complex input is
  -- perturbed alone (its gradient's real, resp. imaginary part is that derivative) and each part
  -- of a complex output is an output of its own (view_as_real); "[j]" in messages counts parts.
  function dle.gradcheck(f, inputs, opts)
    check.callable(f, "gradcheck", "f")
    opts = check.options(opts, "gradcheck", {"eps", "atol", "rtol", "forward"})
    local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
    local ins, nreal = {}, {}
    for i, x in ipairs((as_list(inputs, "gradcheck", "inputs"))) do
      ins[i] = x:detach():to(x:is_complex() and "complex128" or "float64"):clone():requires_grad_(true)
      nreal[i] = reals(ins[i]):numel()
    end
    local function outputs(...)
      local r = table.pack(f(...))
      local list = {}
      for k = 1, r.n do
        if core.is_tensor(r[k]) and (r[k]:is_floating_point() or r[k]:is_complex()) then
          list[#list + 1] = reals(r[k])
        end
      end
      return list
    end
    local worst, msg = 0, nil
    local function compare(what, analytic, numeric, i, j, k)
      local err = math.abs(analytic - numeric)
      if err > worst then worst = err end
      if err > atol + rtol * math.abs(numeric) and not msg then
        msg = string.format("%s: d output %d [%d] / d input %d [%d]: analytic %.8g, numeric %.8g",
                            what, k, j, i, j, analytic, numeric)
      end
    end
    -- numeric Jacobian columns: perturb each input element
    local numeric = {} -- numeric[i][j][k] = list over output elements
    dle.no_grad(function()
      for i, x in ipairs(ins) do
        numeric[i] = {}
        local xv = reals(x):view(-1)
        for j = 1, nreal[i] do
          local v = xv[j]
          -- outputs are read at once: a view of the input would change with it
          local function values_at(value)
            xv[j] = value
            local vals = {}
            for k, o in ipairs(outputs(table.unpack(ins))) do vals[k] = flat(o) end
            return vals
          end
          local plus, minus = values_at(v + eps), values_at(v - eps)
          xv[j] = v
          numeric[i][j] = {}
          for k = 1, #plus do
            local p, m = plus[k], minus[k]
            local col = {}
            for e = 1, #p do col[e] = (p[e] - m[e]) / (2 * eps) end
            numeric[i][j][k] = col
          end
        end
      end
    end)
    -- reverse mode: one backward per output element (the graph is recorded after the
    -- perturbations above, which write into the inputs)
    local outs = outputs(table.unpack(ins))
    for k, out in ipairs(outs) do
      if out.requires_grad then
        for e = 1, out:numel() do
          local onehot = dle.zeros_like(out)
          onehot:view(-1)[e] = 1
          local grads = dle.grad(out, ins, {grad_outputs = onehot, retain_graph = true, allow_unused = true})
          for i in ipairs(ins) do
            local g = grads[i] and flat(grads[i]) or nil
            for j = 1, nreal[i] do compare("reverse", g and g[j] or 0, numeric[i][j][k][e], i, j, k) end
          end
        end
      else
        for i in ipairs(ins) do
          for j = 1, nreal[i] do
            for e = 1, out:numel() do compare("reverse", 0, numeric[i][j][k][e], i, j, k) end
          end
        end
      end
    end
    -- forward mode: one jvp per input element
    if opts.forward then
      for i in ipairs(ins) do
        for j = 1, nreal[i] do
          local tans = {}
          for i2, x2 in ipairs(ins) do tans[i2] = dle.zeros_like(x2) end
          reals(tans[i]):view(-1)[j] = 1
          local _, touts = dle.jvp(function(...) return table.unpack(outputs(...)) end, ins, tans)
          touts = core.is_tensor(touts) and {touts} or touts
          for k, t in ipairs(touts) do
            local tv = flat(t)
            for e = 1, #tv do compare("forward", tv[e], numeric[i][j][k][e], i, j, k) end
          end
        end
      end
    end
    return msg == nil, worst, msg
  end

  -- ---------------------------------------------------------------- backward hooks

  -- Functions run after every outermost t:backward() / dle.backward() returns, in registration
  -- order. A backward started inside a backward (dle.checkpoint's recomputation) or inside a hook
  -- runs none: the hooks see each pass's gradients once, complete.
  local hooks = {}
  local depth, in_hooks = 0, false

  local function run_hooks()
    in_hooks = true
    local ok, err = pcall(function()
      for _, h in ipairs(table.move(hooks, 1, #hooks, 1, {})) do h.fn() end
    end)
    in_hooks = false
    if not ok then error("backward: a backward hook failed: " .. tostring(err), 0) end
  end

  -- Runs a native backward entry point, then the hooks when it was the outermost one.
  local function backward_with_hooks(native, ...)
    depth = depth + 1
    local ok, err = pcall(native, ...)
    depth = depth - 1
    if not ok then error(err, 0) end
    if depth == 0 and not in_hooks and #hooks > 0 then
      -- a replay of a traced backward (dle.graph.train) would not run them
      core._trace_note("backward: backward hooks run Lua code a replayed graph would not")
      run_hooks()
    end
  end

  local native_method, native_function = dle.Tensor.backward, dle.backward
  --- t:backward(grad_or_nil, {retain_graph, create_graph}): accumulates into the leaves' .grad,
  -- then runs the backward hooks.
  function dle.Tensor.backward(...) return backward_with_hooks(native_method, ...) end
  --- dle.backward(outputs, grad_outputs, opts): several outputs in one pass, then the hooks.
  function dle.backward(...) return backward_with_hooks(native_function, ...) end

  local Handle = {}
  Handle.__index = Handle
  Handle.__name = "dle.autograd.BackwardHookHandle"
  --- handle:remove(): the hook runs no more (removing twice is harmless).
  function Handle:remove()
    for i, h in ipairs(hooks) do
      if h == self then table.remove(hooks, i) return end
    end
  end

  --- dle.autograd.register_backward_hook(fn) -> handle
  -- fn() runs after every t:backward() / dle.backward() call returns, once its gradients are
  -- accumulated into .grad (not after dle.grad, which leaves .grad alone). This is where
  -- dle.dist.DistributedDataParallel averages gradients across ranks. An error in fn is raised
  -- by the backward call ("backward: a backward hook failed: ..."). handle:remove() unregisters.
  function dle.autograd.register_backward_hook(fn)
    check.callable(fn, "register_backward_hook", "fn")
    local h = setmetatable({fn = fn}, Handle)
    hooks[#hooks + 1] = h
    return h
  end

  -- ---------------------------------------------------------------- custom ops

  local Ctx = {}
  Ctx.__index = Ctx

  --- ctx:save_for_backward(...) keeps tensors (or nils) for backward, as ctx.saved_tensors.
  -- A saved tensor that is also an output of forward is kept detached (the graph holds it
  -- without a cycle); one modified in place before backward makes backward an error.
  function Ctx:save_for_backward(...)
    self.saved_tensors = table.pack(...)
  end

  --- ctx:mark_non_differentiable(...) : these outputs get no history (no gradient flows to them).
  function Ctx:mark_non_differentiable(...)
    for _, t in ipairs({...}) do self._non_diff[#self._non_diff + 1] = t end
  end

  --- ctx:set_materialize_grads(on): when on (the default) backward receives zeros, not nil, for
  -- the float outputs no gradient reached.
  function Ctx:set_materialize_grads(on) self._materialize = on and true or false end

  local function contains(list, t)
    for _, u in ipairs(list) do
      if rawequal(u, t) or u == t then return true end
    end
    return false
  end

  --- dle.autograd.Function{forward = fn(ctx, ...), backward = fn(ctx, grad...), [jvp], [name]}
  -- returns a callable custom differentiable op. forward runs under no_grad on the given
  -- arguments (tensors and other values) and returns its results; its float and complex tensor results (at
  -- most 2) get one graph node whose reverse rule calls backward(ctx, grad...) with one gradient
  -- per forward result (zeros for a float result no gradient reached, nil for the others); it
  -- returns one gradient (or nil) per TENSOR argument in order (one per argument is also
  -- accepted). ctx: save_for_backward(...) / saved_tensors, needs_input_grad[i] (i indexes the
  -- arguments of forward; false for non-tensors), mark_non_differentiable(...),
  -- set_materialize_grads(bool), and any field the user sets. Nothing is recorded when grad mode
  -- is off or no tensor argument requires grad. With create_graph, what backward computes from
  -- saved inputs is differentiable (double backward). Forward mode: tangents flow through the
  -- dle ops forward runs; or give jvp = fn(ctx, tangent...) -> one tangent per result (nil for
  -- zero), called with one tangent (or nil) per tensor argument.
  function dle.autograd.Function(spec)
    if type(spec) ~= "table" then
      check.error("autograd.Function: expected a table {forward = fn, backward = fn}, got " .. type(spec))
    end
    local name = spec.name or "Function"
    if type(name) ~= "string" then check.error("autograd.Function: name must be a string") end
    local forward, backward, jvp = spec.forward, spec.backward, spec.jvp
    if type(forward) ~= "function" then check.error(name .. ": forward must be a function") end
    if type(backward) ~= "function" then check.error(name .. ": backward must be a function") end
    if jvp ~= nil and type(jvp) ~= "function" then check.error(name .. ": jvp must be a function") end

    local function apply(...)
      local args = table.pack(...)
      local tin, tpos = {}, {}
      local record = false
      local needs = {}
      local enabled = dle.is_grad_enabled()
      for i = 1, args.n do
        local a = args[i]
        needs[i] = false
        if core.is_tensor(a) then
          tin[#tin + 1], tpos[#tpos + 1] = a, i
          if enabled and a.requires_grad then needs[i], record = true, true end
        end
      end
      local ctx = setmetatable({needs_input_grad = needs, saved_tensors = {n = 0}, _non_diff = {},
                                _materialize = true, name = name}, Ctx)
      -- with a jvp rule, forward runs on tangent-free inputs and the rule gives the tangents
      local tangents, any_tangent = {}, false
      if jvp then
        for j, t in ipairs(tin) do
          tangents[j] = core._tangent(t)
          if tangents[j] then any_tangent = true; core._set_tangent(t, nil) end
        end
      end
      local res = table.pack(pcall(dle.no_grad, forward, ctx, ...))
      -- the jvp rule also runs on tangent-free inputs (its result carries no tangent itself)
      local tres = (res[1] and any_tangent)
                   and table.pack(pcall(dle.no_grad, jvp, ctx, table.unpack(tangents, 1, #tin)))
      if any_tangent then
        for j, t in ipairs(tin) do if tangents[j] then core._set_tangent(t, tangents[j]) end end
      end
      if not res[1] then error(res[2], 0) end
      if tres and not tres[1] then error(name .. " jvp: " .. tostring(tres[2]), 0) end
      local results = table.move(res, 2, res.n, 1, {n = res.n - 1})
      if any_tangent then
        local touts = table.move(tres, 2, tres.n, 1, {n = tres.n - 1})
        for k = 1, results.n do
          local o, t = results[k], touts[k]
          if core.is_tensor(o) and (o:is_floating_point() or o:is_complex()) and t ~= nil then
            if not core.is_tensor(t) then
              check.error(string.format("%s: jvp result %d must be a tensor or nil, got %s", name, k, type(t)))
            end
            core._set_tangent(o, t)
          end
        end
      end
      if not record then return table.unpack(results, 1, results.n) end

      -- the differentiable outputs: float tensors, as new headers when forward handed back an
      -- input (or the same tensor twice), whose history must not be rewritten
      local outs, opos, meta = {}, {}, {}
      for k = 1, results.n do
        local o = results[k]
        if core.is_tensor(o) and (o:is_floating_point() or o:is_complex()) and not contains(ctx._non_diff, o) then
          if contains(tin, o) or contains(outs, o) then
            o = o:detach()
            results[k] = o
          end
          outs[#outs + 1], opos[#opos + 1] = o, k
          meta[k] = {shape = o:shape(), dtype = o:dtype()}
        end
      end
      if #outs == 0 then return table.unpack(results, 1, results.n) end
      if #outs > 2 then
        check.error(string.format("%s: a custom Function has at most 2 differentiable (float tensor) "
                            .. "outputs, got %d (mark the others with ctx:mark_non_differentiable)",
                            name, #outs))
      end
      -- saved tensors: outputs are kept detached (no cycle node -> closure -> output -> node);
      -- each one's version is checked by backward
      local saved, versions = ctx.saved_tensors, {}
      for i = 1, saved.n or #saved do
        local t = saved[i]
        if core.is_tensor(t) then
          if contains(outs, t) then saved[i] = t:detach() end
          versions[i] = t:_version()
        end
      end
      local nres, ntin, nargs = results.n, #tin, args.n

      local function rule(...)
        local g = table.pack(...)
        for i, v in pairs(versions) do
          local now = saved[i]:_version()
          if now ~= v then
            error(string.format("%s: saved_tensors[%d] (shape %s), needed for its gradient, was "
                                .. "modified by an in-place operation after forward (version %d, "
                                .. "expected %d)", name, i, table.concat(saved[i]:shape(), "x"),
                                now, v), 0)
          end
        end
        local grads = {}
        for j, k in ipairs(opos) do
          local gk = g[j]
          if gk == nil and ctx._materialize then
            gk = dle.zeros(meta[k].shape, {dtype = meta[k].dtype})
          end
          grads[k] = gk
        end
        local r = table.pack(pcall(backward, ctx, table.unpack(grads, 1, nres)))
        if not r[1] then error(name .. " backward: " .. tostring(r[2]), 0) end
        local n = r.n - 1
        local pick
        if n == ntin then
          pick = function(j) return r[j + 1] end
        elseif n == nargs then
          pick = function(j) return r[tpos[j] + 1] end
        else
          error(string.format("%s backward: returned %d gradients, expected one per tensor input (%d)",
                              name, n, ntin), 0)
        end
        local gin = {}
        for j = 1, ntin do
          local gj = pick(j)
          if gj ~= nil and not core.is_tensor(gj) then
            error(string.format("%s backward: the gradient of tensor input %d must be a tensor or "
                                .. "nil, got %s", name, j, type(gj)), 0)
          end
          if gj ~= nil and needs[tpos[j]] then gin[j] = gj end
        end
        return table.unpack(gin, 1, ntin)
      end
      core._record_custom(name, outs, tin, rule)
      return table.unpack(results, 1, results.n)
    end

    return apply   -- a plain function, so it goes wherever a function does (pcall, no_grad)
  end
end

return M
