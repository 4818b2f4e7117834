// The device contract (test/helpers/device-suite.ts) with the devices on the plant's Mosquitto the bridge joined.
import { deviceSuite } from '../helpers/device-suite.js';

deviceSuite('external');
