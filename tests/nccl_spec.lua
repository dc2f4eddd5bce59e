-- nccl_spec.lua — dle.dist on CUDA tensors through NCCL (bindings/dist_nccl/nccl.c as the module
-- dle.dist_nccl, lua/dle/dist/nccl.lua). No GPU here: what is checked is that the module is built and
-- linked where nvcc and nccl.h are, that it maps every dle dtype to an NCCL type, that CPU users
-- never load it, and that the CUDA path is reachable from Lua and fails with errors naming the dle
-- function (the collectives' results on real GPUs need a machine with them: scripts/gpu-check).
local dle = require("dle")
local H = require("helpers")

local build = os.getenv("DLE_BUILD") or "build"
if build:sub(1, 1) ~= "/" then build = os.getenv("PWD") .. "/" .. build end
local library = build .. "/lib/dle/dist_nccl.so"

-- Where premake5.lua looks for nccl.h: $NCCL_HOME/include, else the include directory of the
-- toolkit of the nvcc the build uses; nil without nvcc.
local function nccl_header()
  local nvcc = H.nvcc()
  if not nvcc then return nil end
  return (os.getenv("NCCL_HOME") or nvcc:match("^(.*)/bin/nvcc$") or "/usr/local/cuda") .. "/include/nccl.h"
end

local function output_of(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  p:close()
  return out
end

describe("dle.dist on CPU tensors", function()
  it("CPU tensors never load NCCL", function()
    dle.dist.init()   -- a world of one process
    local dist, t = dle.dist, dle.ones(3)
    dist.all_reduce(t)
    dist.broadcast(t, 0)
    local out = {dle.zeros(3)}
    dist.all_gather(out, t)
    dist.reduce_scatter(dle.zeros(3), {t})
    assert.is_nil(package.loaded["dle.dist_nccl"])
    assert.is_nil(package.loaded["dle.dist.nccl"])
  end)
end)

describe("the NCCL module dle.dist_nccl", function()
  it("is built where nvcc and nccl.h are found, and links libnccl and libcudart", function()
    local header = nccl_header()
    if not H.assert_built_when(header ~= nil and H.exists(header), library, "nvcc and nccl.h") then return end
    local deps = output_of("ldd " .. library)
    assert.truthy(deps:find("libnccl.so", 1, true), deps)
    assert.truthy(deps:find("libcudart.so", 1, true), deps)
    assert.is_nil(deps:find("not found", 1, true), deps)
    -- every symbol it needs resolves but the interpreter's (a Lua C module does not link liblua)
    local unresolved = {}
    for sym in output_of("ldd -r " .. library):gmatch("undefined symbol: (%S+)") do
      if not sym:match("^luaL?_") then unresolved[#unresolved + 1] = sym end
    end
    assert.are.same({}, unresolved)
  end)

  it("maps every dtype of the engine to an NCCL type (bool and uint8 as ncclUint8)", function()
    if not H.exists(library) then return pending("dle.dist_nccl was not built (no nvcc or nccl.h)") end
    local map = assert(require("dle.dist.nccl").dtypes())
    local names = dle.core._dtype_names()
    assert.is_true(#names >= 8, #names .. " dtypes")
    for _, name in ipairs(names) do
      assert.is_string(map[name], "dtype " .. name .. " has no NCCL type in bindings/dist_nccl/nccl.c")
    end
    assert.are.same({"ncclFloat32", "ncclFloat64", "ncclFloat16", "ncclBfloat16", "ncclInt32", "ncclInt64",
                     "ncclUint8", "ncclUint8"},
                    {map.float32, map.float64, map.float16, map.bfloat16, map.int32, map.int64, map.uint8, map.bool})
  end)

  it("names the NCCL version it was compiled against, the one of nccl.h", function()
    if not H.exists(library) then return pending("dle.dist_nccl was not built") end
    local m = require("dle.dist_nccl")
    local header = assert(H.read_file(nccl_header()))
    local v = header:match("#define NCCL_MAJOR (%d+)") .. "." .. header:match("#define NCCL_MINOR (%d+)") .. "."
      .. header:match("#define NCCL_PATCH (%d+)")
    assert.are.equal("NCCL " .. v, m.version)
    assert.are.equal(128, m.unique_id_bytes)
  end)

  it("rejects bad arguments with errors naming the function, without a crash", function()
    if not H.exists(library) then return pending("dle.dist_nccl was not built") end
    local m = require("dle.dist_nccl")
    H.assert_error(function() m.all_reduce(1) end, "all_reduce", "dle.dist.NcclComm expected")
    H.assert_error(function() m.send({}, nil, 1, "float32", 0) end, "send", "dle.dist.NcclComm expected")
    H.assert_error(function() m.unique_id(7, "broadcast") end, "broadcast: expected a raw buffer")
    local id = dle.zeros(128, {dtype = "uint8"})
    local ptr = dle.core._raw_buffer(id, "t", true)
    H.assert_error(function() m.comm_init(ptr, 2, 2, 0, "all_gather") end, "all_gather: rank 2 of 2 ranks")
    H.assert_error(function() m.comm_init(ptr, 1, 0, -1, "recv") end, "recv: device index -1")
  end)
end)

describe("dle.dist collectives and NCCL", function()
  local dist = dle.dist
  dist.init()   -- a world of one process

  it("the CUDA path is reachable from Lua; without a GPU, making the communicator is an error naming the collective",
     function()
    if not H.exists(library) then return pending("dle.dist_nccl was not built") end
    if dle.cuda_available() then return pending("a CUDA device is present: scripts/gpu-check runs the collectives") end
    local nccl = require("dle.dist.nccl")
    assert.is_true(nccl.available())
    local m = require("dle.dist_native")
    -- what dist.all_reduce does for a tensor on cuda:0 once its checks pass: the world's
    -- communicator on device 0 (an ncclUniqueId broadcast over MPI, then ncclCommInitRank)
    local err = H.assert_error(function() nccl.transport(m, nil, 0, "all_reduce") end, "all_reduce: ")
    assert.truthy(err:find("ncclGetUniqueId failed", 1, true) or err:find("cudaSetDevice failed", 1, true)
                  or err:find("ncclCommInitRank failed", 1, true), err)
    -- and again (nothing half-made is cached)
    H.assert_error(function() nccl.transport(m, nil, 0, "broadcast") end, "broadcast: ")
  end)
end)

describe("dle.dist without the NCCL module", function()
  it("a CUDA tensor's collective says NCCL support was not built, naming the function", function()
    -- a module path holding dle.core and dle.native but no dle.dist_nccl
    local dir = H.tmpdir()
    assert(os.execute("mkdir -p '" .. dir .. "/dle' && ln -s '" .. build .. "/lib/dle/core.so' '" .. build
      .. "/lib/dle/native.so' '" .. build .. "/lib/dle/dist_native.so' '" .. dir .. "/dle/'"))
    local root = os.getenv("PWD")
    local out = output_of("LUA_PATH='" .. root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;;' LUA_CPATH='" .. dir
      .. "/?.so' lua5.4 -e 'local dle = require \"dle\"; dle.dist.init(); "
      .. "print(pcall(require(\"dle.dist.nccl\").transport, require \"dle.dist_native\", nil, 0, \"send\"))'")
    os.execute("rm -rf '" .. dir .. "'")
    assert.truthy(out:find("send: a tensor on cuda:0 needs NCCL: NCCL support was not built (no "
                           .. "dle/dist_nccl.so beside " .. dir .. "/dle/core.so", 1, true), out)
  end)
end)
