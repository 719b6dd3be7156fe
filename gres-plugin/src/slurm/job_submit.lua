-- job_submit.lua written by `flexgres job-submit` (optional: install it only if you want it).
--
-- Flex-MIG's size-aware leaf type (Flex-MIG, section 3.2) for GPU requests that name no type:
-- a job that asks for one GPU gets a @LARGE@ leaf (one-leaf jobs run 10-30% faster on it),
-- a job that asks for several gets @SMALL@ leaves (a multi-leaf job runs at the pace of its
-- slowest leaf, so larger leaves would be wasted). Typed requests (--gres=gpu:1g.5gb:2) and
-- other GRES pass unchanged. slurmctld loads it with JobSubmitPlugins=lua; the file lives
-- beside slurm.conf.

local SMALL = "@SMALL@"
local LARGE = "@LARGE@"
local NO_VAL = 0xfffffffe

-- A count Slurm leaves unset reads as nil or NO_VAL: one.
local function count(v)
  if v == nil or v == 0 or v >= NO_VAL then
    return 1
  end
  return v
end

-- "gpu", "gpu:N", "gres:gpu:N" with the job's size in leaves -> the typed form, or nil when
-- the item is not an untyped GPU request.
local function retype(item, times)
  local prefix = ""
  if string.sub(item, 1, 5) == "gres:" then
    prefix = "gres:"
    item = string.sub(item, 6)
  end
  local n
  if item == "gpu" then
    n = 1
  else
    n = tonumber(string.match(item, "^gpu:(%d+)$"))
  end
  if n == nil then
    return nil
  end
  if n * times == 1 then
    return prefix .. "gpu:" .. LARGE .. ":1"
  end
  return prefix .. "gpu:" .. SMALL .. ":" .. n
end

local function rewrite(spec, times)
  if spec == nil or spec == "" then
    return spec, false
  end
  local out, changed = {}, false
  for item in string.gmatch(spec, "[^,]+") do
    local r = retype(item, times)
    if r then
      changed = true
      table.insert(out, r)
    else
      table.insert(out, item)
    end
  end
  return table.concat(out, ","), changed
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local per = {
    tres_per_job = 1,
    tres_per_node = count(job_desc.min_nodes),
    tres_per_task = count(job_desc.num_tasks),
    tres_per_socket = 2, -- sockets per job are not known here: treat as several
  }
  for field, times in pairs(per) do
    local new, changed = rewrite(job_desc[field], times)
    if changed then
      slurm.log_info("flex size-aware rule: %s %s -> %s", field, job_desc[field], new)
      job_desc[field] = new
    end
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
