/** The shared driver behaviour (suite.ts) against the real none driver. */
import { driverSuite } from './suite.ts';

driverSuite('none');
