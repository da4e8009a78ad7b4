import { app } from "../../scripts/app.js";

app.registerExtension({
  name: "v1_pack.marker",
  async setup() {
    window.__v1PackLoaded = true;
  },
});
