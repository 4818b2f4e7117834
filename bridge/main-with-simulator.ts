// `npm start`: the service as main.ts runs it, except that while UPSTREAM_URL is unset it
// starts the bundled upstream simulator and answers from it, so that a clone runs with no
// configuration at all. The simulator is chosen here, never in the service's own entry.
import { startUpstreamSim } from '../upstream-sim/sim.js';
import { runService } from './service.js';

runService({ standIn: () => startUpstreamSim({ port: 0, latencyMs: 50, jitterMs: 10 }) });
