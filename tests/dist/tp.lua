--- MPI worker of tests/dist_spec.lua: dle.dist.tensor_parallel's ColumnLinear and RowLinear against
-- the dense nn.Linear layers they split, in float64 (outputs and gradients), reported as lines
-- rank=<r> <key>=<value> (tests/dist/common.lua).
local dle = require("dle")
local common = require("dist.common")
local dist = dle.dist
local nn, F = dle.nn, dle.nn.functional
local tp = dist.tensor_parallel

local pg <close>, rank, _, emit = common.start() -- luacheck: ignore 211 (pg: used by its <close>)
local world = dist.world_size()
local F64 = {dtype = "float64"}

local function diff(a, b) return (a - b):abs():max():item() end

-- the same input and output weights on every rank
local x0 = dle.randn({3, 5, 8}, {generator = dle.Generator(3), dtype = "float64"})
local w = dle.randn({3, 5, 6}, {generator = dle.Generator(4), dtype = "float64"})

-- the dense MLP, and its split: Column (outputs kept split) -> gelu -> Row (input already split)
local lin1 = nn.Linear(8, 12, {generator = dle.Generator(1), dtype = "float64"})
local lin2 = nn.Linear(12, 6, {generator = dle.Generator(2), dtype = "float64"})
local col = tp.ColumnLinear(8, 12, {generator = dle.Generator(1), dtype = "float64", gather_output = false})
local row = tp.RowLinear(12, 6, {generator = dle.Generator(2), dtype = "float64", input_is_parallel = true})

local xd = x0:clone():requires_grad_(true)
local yd = lin2(F.gelu(lin1(xd)))
dle.backward((yd * w):sum())
local xt = x0:clone():requires_grad_(true)
local yt = row(F.gelu(col(xt)))
dle.backward((yt * w):sum())

local share = 12 // world
emit("mlp_y", diff(yt, yd))
emit("mlp_gx", diff(xt.grad, xd.grad))
emit("mlp_gw1", diff(col.weight.grad, lin1.weight.grad:narrow(1, rank * share + 1, share)))
emit("mlp_gb1", diff(col.bias.grad, lin1.bias.grad:narrow(1, rank * share + 1, share)))
emit("mlp_gw2", diff(row.weight.grad, lin2.weight.grad:narrow(2, rank * share + 1, share)))
emit("mlp_gb2", diff(row.bias.grad, lin2.bias.grad))
emit("shapes", table.concat(col.weight:shape(), "x") .. " " .. table.concat(row.weight:shape(), "x"))

-- each alone on the whole input and output, loaded from one dense layer: Column gathers its
-- output columns, Row takes its share of the input's features
local dense = nn.Linear(8, 12, {generator = dle.Generator(5), dtype = "float64"})
local c2 = tp.ColumnLinear(8, 12, F64):load_dense(dense)
local r2 = tp.RowLinear(8, 12, F64):load_dense(dense)
local w2 = dle.randn({3, 5, 12}, {generator = dle.Generator(9), dtype = "float64"})
local xs, ys = {}, {}
for k, layer in ipairs({dense, c2, r2}) do
  xs[k] = x0:clone():requires_grad_(true)
  ys[k] = layer(xs[k])
  dle.backward((ys[k] * w2):sum())
end
emit("column_y", diff(ys[2], ys[1]))
emit("column_gx", diff(xs[2].grad, xs[1].grad))
emit("row_y", diff(ys[3], ys[1]))
emit("row_gx", diff(xs[3].grad, xs[1].grad))
emit("row_gw", diff(r2.weight.grad, dense.weight.grad:narrow(2, rank * (8 // world) + 1, 8 // world)))

-- the transformer block: attention split by heads, the MLP by columns/rows, LayerNorms whole
local block = nn.TransformerBlock(16, 4, {causal = true, generator = dle.Generator(6), dtype = "float64"})
local tblock = tp.TransformerBlock(16, 4, {causal = true, generator = dle.Generator(6), dtype = "float64"})
local xb = dle.randn({2, 5, 16}, {generator = dle.Generator(7), dtype = "float64"})
local wb = dle.randn({2, 5, 16}, {generator = dle.Generator(8), dtype = "float64"})
local xbd, xbt = xb:clone():requires_grad_(true), xb:clone():requires_grad_(true)
local ybd, ybt = block(xbd), tblock(xbt)
dle.backward((ybd * wb):sum())
dle.backward((ybt * wb):sum())
local hw = 16 // world   -- each rank's share of the heads' width
local function qkv_rows(t)
  local parts = {}
  for k = 0, 2 do parts[k + 1] = t:narrow(1, k * 16 + rank * hw + 1, hw) end
  return dle.cat(parts, 1)
end
emit("block_y", diff(ybt, ybd))
emit("block_gx", diff(xbt.grad, xbd.grad))
emit("block_gqkv", diff(tblock.attn.qkv_weight.grad, qkv_rows(block.attn.qkv.weight.grad)))
emit("block_gqkv_b", diff(tblock.attn.qkv_bias.grad, qkv_rows(block.attn.qkv.bias.grad)))
emit("block_gproj", diff(tblock.attn.proj.weight.grad, block.attn.proj.weight.grad:narrow(2, rank * hw + 1, hw)))
local fw = 64 // world   -- each rank's share of the MLP's hidden width
emit("block_gfc1", diff(tblock.fc1.weight.grad, block.fc1.weight.grad:narrow(1, rank * fw + 1, fw)))
emit("block_gfc2", diff(tblock.fc2.weight.grad, block.fc2.weight.grad:narrow(2, rank * fw + 1, fw)))
emit("block_gln", diff(tblock.ln1.weight.grad, block.ln1.weight.grad) + diff(tblock.ln2.bias.grad, block.ln2.bias.grad))

-- errors name the layer and the sizes
emit("bad_split", select(2, pcall(tp.ColumnLinear, 8, 7)))
emit("bad_input", select(2, pcall(function() return row(dle.zeros(2, 12, F64)) end)))
emit("bad_heads", select(2, pcall(tp.Attention, 16, 6 * world + 1)))
emit("done", 1)
