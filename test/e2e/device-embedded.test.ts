// The device contract (test/helpers/device-suite.ts) with the devices on the bridge's embedded broker.
import { deviceSuite } from '../helpers/device-suite.js';

deviceSuite('embedded');
