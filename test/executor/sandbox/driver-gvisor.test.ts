/** The shared driver behaviour (suite.ts) against the real gvisor driver. */
import { driverSuite } from './suite.ts';

driverSuite('gvisor');
