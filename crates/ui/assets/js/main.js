// The page script's entry (`<script type="module" src="/ui/js/main.js">`): draws the
// page the shell names, once the viewer is known.

import { me, page, setMe, showWho, toSignIn, whoAmI } from "./common.js";
import { listPage } from "./list.js";
import { requestPage } from "./request.js";
import { startPage } from "./start.js";
import { runnersPage, schedulesPage, signInPage } from "./admin.js";

const pages = { list: listPage, request: requestPage, start: startPage, runners: runnersPage, schedules: schedulesPage, "sign-in": signInPage };
whoAmI().then((found) => {
  setMe(found);
  showWho();
  if (me.auth && !me.signedIn && page !== "sign-in") {
    toSignIn();
    return;
  }
  if (pages[page]) pages[page]();
});
