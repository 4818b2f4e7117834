// The service as Docker, systemd and `edge-ai-bridge start` run it: the upstream is UPSTREAM_URL,
// and without it the start stops (exit 2); it never answers from a simulator.
import { runService } from './service.js';

runService();
