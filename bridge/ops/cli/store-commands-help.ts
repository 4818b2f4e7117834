// The operator commands' usage lines, apart from store-commands.ts so `help` loads no Redis client.
export const OPS_USAGE = `  dlq list [--limit N] | show DEVICE ID | replay [deviceId/id …] | purge --yes
            the dead-letter list of the deployment on REDIS_URL (REDIS_PREFIX): list prints
            a table, oldest first (read a page at a time), show one entry with its request
            (exit 1 if there is none); replay without keys replays them all; purge asks on
            a terminal, elsewhere it needs --yes
  usage [hours]
            tokens and estimated cost by device, model, priority and template (default: the
            last 24 hours)
  budgets   each CONFIG_FILE budget's use in its current period
            (dlq list, usage and budgets print the raw JSON with --json)`;
