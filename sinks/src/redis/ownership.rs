//! Claiming a job in Redis (see `crate::ownership`): the owner hash `{prefix}:{job}:owner`
//! holds the job's generation, bumped by one script so two claims never get the same number;
//! the commit script checks it. Redis has no liveness lock. `reset` deletes the job's lists
//! (sorted sets, meta and trend hashes), instance ranges and commit hash (Redis holds no dead
//! letters).

use super::keys::check_key_part;
use super::RedisStore;
use crate::error::SinkError;
use crate::ownership::{Claim, Owner};
use crate::store::StoreReader;
use ::redis::Script;
use hotlist_operators::group::GroupKey;
use hotlist_operators::time::Millis;
use std::sync::LazyLock;

/// KEYS[1] the owner hash; ARGV[1] the new owner, ARGV[2] the time. Returns the previous
/// generation ('' if none), the previous owner and the new generation.
static CLAIM_SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'none' and t ~= 'hash' then
  return redis.error_reply('HOTLIST_CORRUPT ' .. KEYS[1] .. ' is a ' .. t .. ', not a hash')
end
local prev = redis.call('HMGET', KEYS[1], 'generation', 'owner')
local g = 0
if prev[1] then
  if not string.match(prev[1], '^%d+$') then
    return redis.error_reply('HOTLIST_CORRUPT ' .. KEYS[1] .. ' field generation is not a number')
  end
  g = tonumber(prev[1])
end
local new = string.format('%d', g + 1)
redis.call('HSET', KEYS[1], 'generation', new, 'owner', ARGV[1], 'claimed_at', ARGV[2])
return {prev[1] or '', prev[2] or '', new}
",
    )
});

impl RedisStore {
    /// Bumps the job's generation and fences this handle's later commits with it.
    pub(super) fn claim_job(&mut self, job: &str, owner: &str) -> Result<Claim, SinkError> {
        check_key_part(job, "job id", job)?;
        let key = self.owner_key(job);
        let (prev_generation, prev_owner, new): (String, String, String) = self.run(
            || format!("claiming job {job:?}"),
            |c| CLAIM_SCRIPT.key(&key).arg(owner).arg(Millis::now().0).invoke(c),
        )?;
        let number = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| self.corrupt(format!("{key}: generation {s:?} is not a number")))
        };
        let previous = match prev_generation.as_str() {
            "" => None,
            g => Some(Owner {
                generation: number(g)?,
                owner: prev_owner,
            }),
        };
        let generation = number(&new)?;
        self.claims.insert(job, generation);
        Ok(Claim { generation, previous })
    }

    /// Deletes the job's commit hash, the lists of the windows its windows document names and
    /// the ranges of every window its set of windows with ranges names.
    pub(super) fn reset_job(&mut self, job: &str) -> Result<(), SinkError> {
        check_key_part(job, "job id", job)?;
        let mut keys = vec![self.commit_key(job), self.hot_key(job)];
        let ranged_key = self.ranged_windows_key(job);
        let ranged: Vec<String> = self.run(
            || format!("listing the windows with ranges of job {job:?}"),
            |c| ::redis::cmd("SMEMBERS").arg(&ranged_key).query(c),
        )?;
        for w in &ranged {
            keys.push(self.ranges_key(job, w));
            keys.push(self.range_starts_key(job, w));
        }
        keys.push(ranged_key);
        for w in StoreReader::windows(self, job)? {
            keys.push(self.list_key(job, &w.name));
            keys.push(self.meta_key(job, &w.name));
            keys.push(self.group_trend_key(job, &w.name, &GroupKey::global()));
            let gkey = self.groups_key(job, &w.name);
            let groups: Vec<String> = self.run(
                || format!("listing the groups of job {job:?} window {:?}", w.name),
                |c| ::redis::cmd("ZRANGE").arg(&gkey).arg(0).arg(-1).query(c),
            )?;
            for g in groups.into_iter().map(GroupKey::from_stored) {
                keys.push(self.group_list_key(job, &w.name, &g));
                keys.push(self.group_meta_key(job, &w.name, &g));
                keys.push(self.group_trend_key(job, &w.name, &g));
            }
            keys.push(gkey);
        }
        self.run(
            || format!("resetting job {job:?}"),
            |c| ::redis::cmd("DEL").arg(&keys).exec(c),
        )
    }
}
