-- wrk script of the shapes step: POSTs the JSON bodies of a file (one per line, argument 1)
-- in turn, and checks EVERY response. Each root field of a body is aliased `pN_I`: N is how
-- many rows it must answer (0 for a key absent from the data set). A response counts as
-- right only if it is a 200 without "errors", and its `"<key field>":"K","count":C` pairs
-- (argument 3 names the key field) number the sum of its aliases' N, each K a key of the
-- data set `bkNNNNNNN` and C its count there: 1 + (N * 2654435761) mod 1000003
-- (tests.bench.dataset). Argument 2 is unused. Prints one line "BENCHJSON {...}"
-- (latencies in microseconds) with the responses checked and the wrong ones.

local pair = nil
-- bodies, index, threads, load_bodies, setup, request and done(): shared with wrk_checked.lua
dofile(string.match(debug.getinfo(1, "S").source, "^@(.*/)") .. "wrk_common.lua")

bad = 0 -- not 200, or GraphQL errors
wrong = 0 -- 200 without errors, but not the rows the data set holds
checked = 0

function init(args)
  load_bodies(args[1])
  pair = '"' .. args[3] .. '"%s*:%s*"([^"]*)"%s*,%s*"count"%s*:%s*(%d+)'
  -- a run starts where no run of the same second did (wrk does not seed the generator, so
  -- every run would start at one index and ask the keys the run before it asked)
  math.randomseed(os.time())
  index = math.random(#bodies) - 1
end

local function truth(key)
  local n = string.match(key, "^bk(%d+)$")
  if not n then
    return nil
  end
  return 1 + math.fmod(tonumber(n) * 2654435761, 1000003)
end

local function right(body)
  local wanted = 0
  for n in string.gmatch(body, '"p(%d+)_%d+"%s*:') do
    wanted = wanted + tonumber(n)
  end
  local found = 0
  for key, count in string.gmatch(body, pair) do
    if truth(key) ~= tonumber(count) then
      return false
    end
    found = found + 1
  end
  return found == wanted
end

function response(status, headers, body)
  checked = checked + 1
  if status ~= 200 or string.find(body, '"errors"', 1, true) then
    bad = bad + 1
    return
  end
  if not right(body) then
    wrong = wrong + 1
  end
end
