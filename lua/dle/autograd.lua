--- Autodiff in Lua: forward mode (dle.jvp), gradient checking (dle.gradcheck) and custom
-- differentiable ops (dle.autograd.Function). Reverse mode itself (t:backward, dle.grad,
-- dle.no_grad) is native (bindings/lua_autograd.c).
return function(dle)
  local core = dle.core
  dle.autograd = dle.autograd or {}

  local function as_list(v)
    if core.is_tensor(v) then return {v}, true end
    return v, false
  end

  --- dle.jvp(f, inputs, tangents) -> outputs, output_tangents (forward mode).
  -- inputs/tangents: a tensor or a list of tensors. Each op computes its output's tangent from
  -- its inputs' with its forward rule while f runs. Returns what f returns (a tensor, or a list
  -- when f returns several values) and the matching tangent(s).
  function dle.jvp(f, inputs, tangents)
    local ins, single = as_list(inputs)
    local tans = as_list(tangents)
    if #tans ~= #ins then
      error(string.format("jvp: %d tangents for %d inputs", #tans, #ins), 2)
    end
    local primals = {}
    for i, x in ipairs(ins) do
      primals[i] = x:detach()
      core.set_tangent(primals[i], tans[i])
    end
    local results = table.pack(f(table.unpack(primals, 1, #ins)))
    local outs, out_tans = {}, {}
    for k = 1, results.n do
      local o = results[k]
      if not core.is_tensor(o) then error("jvp: f returned a " .. type(o) .. " as result " .. k, 2) end
      outs[k] = o
      out_tans[k] = core.tangent(o) or dle.zeros_like(o)
      core.set_tangent(o, nil)
    end
    for _, p in ipairs(primals) do core.set_tangent(p, nil) end
    if results.n == 1 then return outs[1], out_tans[1] end
    return outs, out_tans
  end

  local function flat(t) return t:contiguous():view(-1):totable() end

  --- dle.gradcheck(f, inputs, {eps, atol, rtol, forward}) -> ok, max_abs_error[, message]
  -- Compares the gradients of f at inputs (copied to float64) from reverse mode (and from
  -- forward mode when opts.forward) with central finite differences. f returns one tensor or
  -- several; integer outputs are ignored.
  function dle.gradcheck(f, inputs, opts)
    opts = opts or {}
    local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
    local ins = {}
    for i, x in ipairs((as_list(inputs))) do
      ins[i] = x:detach():to("float64"):clone():requires_grad_(true)
    end
    local function outputs(...)
      local r = table.pack(f(...))
      local list = {}
      for k = 1, r.n do
        if core.is_tensor(r[k]) and r[k]:is_floating_point() then list[#list + 1] = r[k] end
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
        local xv = x:view(-1)
        for j = 1, x:numel() do
          local v = xv[j]
          xv[j] = v + eps
          local plus = outputs(table.unpack(ins))
          xv[j] = v - eps
          local minus = outputs(table.unpack(ins))
          xv[j] = v
          numeric[i][j] = {}
          for k = 1, #plus do
            local p, m = flat(plus[k]), flat(minus[k])
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
          for i, x in ipairs(ins) do
            local g = grads[i] and flat(grads[i]) or nil
            for j = 1, x:numel() do compare("reverse", g and g[j] or 0, numeric[i][j][k][e], i, j, k) end
          end
        end
      else
        for i, x in ipairs(ins) do
          for j = 1, x:numel() do
            for e = 1, out:numel() do compare("reverse", 0, numeric[i][j][k][e], i, j, k) end
          end
        end
      end
    end
    -- forward mode: one jvp per input element
    if opts.forward then
      for i, x in ipairs(ins) do
        for j = 1, x:numel() do
          local tans = {}
          for i2, x2 in ipairs(ins) do tans[i2] = dle.zeros_like(x2) end
          tans[i]:view(-1)[j] = 1
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
end
