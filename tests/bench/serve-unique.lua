-- wrk script for POST /v1/search that never repeats a request
-- (scripts/bench-serve.sh, the cache misses):
--   wrk -tT -s tests/bench/serve-unique.lua URL -- BODIES T
-- BODIES holds one request body a line, none twice; wrk's T threads take
-- the lines in turn (thread t the lines t, t+T, t+2T, ...), so no body is
-- sent twice until the file is used up.
local threads = 0

function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

local bodies = {}
local i, step

function init(args)
  local f = assert(io.open(args[1], "r"), "cannot open the bodies file")
  for line in f:lines() do
    if #line > 0 then bodies[#bodies + 1] = line end
  end
  f:close()
  assert(#bodies > 0, "no request bodies")
  step = tonumber(args[2]) or 1
  i = id - step
end

function request()
  i = i + step
  return wrk.format("POST", "/v1/search",
                    { ["Content-Type"] = "application/json" }, bodies[i % #bodies + 1])
end
