package main

import (
	"reflect"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// TestBridgeOptionsCarryEveryAdminLimit: every admin setting that has a
// bridge.Options field of the same name reaches the bridge (an admin who
// sets [limits] chunk_memory must get it, not the default), so a setting
// added to one side and forgotten in bridgeOptions fails here.
func TestBridgeOptionsCarryEveryAdminLimit(t *testing.T) {
	var admin jupyter.AdminSettings
	av := reflect.ValueOf(&admin).Elem()
	for i := 0; i < av.NumField(); i++ {
		f := av.Field(i)
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			if f.Type() == reflect.TypeOf(time.Duration(0)) {
				f.SetInt(int64(time.Duration(i+1) * time.Minute))
			} else {
				f.SetInt(int64(i+1) << 20)
			}
		case reflect.Slice:
			if f.Type().Elem().Kind() == reflect.String {
				f.Set(reflect.ValueOf([]string{"X_" + av.Type().Field(i).Name}))
			}
		case reflect.Bool:
			// Every bool set, so that one forgotten reaches the bridge as false.
			f.SetBool(true)
		case reflect.String:
			f.SetString("/x/" + av.Type().Field(i).Name)
		}
	}
	opts := bridgeOptions(admin)
	ov := reflect.ValueOf(opts)
	carried := 0
	for i := 0; i < av.NumField(); i++ {
		name := av.Type().Field(i).Name
		of := ov.FieldByName(name)
		if !of.IsValid() {
			continue
		}
		carried++
		if !reflect.DeepEqual(of.Interface(), av.Field(i).Interface()) {
			t.Errorf("admin %s = %v reaches the bridge as %v", name, av.Field(i).Interface(), of.Interface())
		}
	}
	if carried < 18 {
		t.Errorf("only %d admin settings share a name with bridge.Options; the test no longer sees them", carried)
	}
}
