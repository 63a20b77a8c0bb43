provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "kv" {
  name     = "rg-kv"
  location = "westeurope"
}

resource "azurerm_key_vault" "main" {
  name                       = "kv-acme-prod"
  location                   = azurerm_resource_group.kv.location
  resource_group_name        = azurerm_resource_group.kv.name
  tenant_id                  = "00000000-0000-0000-0000-000000000000"
  sku_name                   = "standard"
  soft_delete_retention_days = 7
  purge_protection_enabled   = true

  network_acls {
    default_action = "Deny"
    bypass         = "AzureServices"
  }
}

resource "azurerm_key_vault_secret" "db" {
  name         = "db-password"
  value        = "not-a-real-secret"
  key_vault_id = azurerm_key_vault.main.id
}
